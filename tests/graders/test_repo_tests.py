"""The ``repo_tests`` grader on a real engine, with the shipped tomli tasks (real bug fixes):
gold patches earn full reward, empty ones nothing, an agent's fix made with the tools earns it
too, each test's outcome is in the metadata, and the container exploits earn nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from envbuilder.authoring import run_cases
from envbuilder.authoring._hacks import CONTAINER_HACKS, hack_cases
from envbuilder.authoring._selfcheck import Case
from envbuilder.environment import Environment, load_environment
from envbuilder.episode import Episode
from envbuilder.graders._repo_tree import build_tree, is_protected, patch_paths, read_tar
from envbuilder.protocol import RunToolSuccess
from tests.sandboxes import needs_base_image

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def swe() -> Environment:
    needs_base_image()
    return load_environment(ROOT / "envs" / "swe_tomli.yaml")


def _submit(env: Environment, episode: Episode, answer: str) -> Any:
    result = asyncio.run(env.call_tool(episode, "submit", {"answer": answer}))
    assert isinstance(result, RunToolSuccess), result
    return result.output


def test_gold_patches_earn_full_reward_and_empty_ones_none(swe: Environment) -> None:
    view = swe.split("test")
    cases = []
    for index in range(len(view)):
        cases.append(Case("gold", f"gold[{index}]", "test", index, view.task(index)["patch"], 1.0))
        cases.append(Case("empty", f"empty[{index}]", "test", index, "", 0.0))
    results = run_cases(swe, cases)
    assert [(r.case.label, r.reward) for r in results] == [(c.label, c.expected) for c in cases]


def test_a_fix_made_in_the_container_is_graded_with_each_tests_outcome(swe: Environment) -> None:
    task = swe.split("test").task(0)  # tomli-96dfe2c: TOMLDecodeError's module
    episode = Episode(task=task)
    assert "patch" not in swe.public(task) and "FAIL_TO_PASS" not in swe.public(task)
    try:
        asyncio.run(
            swe.call_tool(
                episode,
                "edit_file",
                {
                    "path": "tomli/__init__.py",
                    "old_text": "from tomli._parser import TOMLDecodeError, load, loads\n",
                    "new_text": "from tomli._parser import TOMLDecodeError, load, loads\n\n"
                    'TOMLDecodeError.__module__ = "tomli"\n',
                },
            )
        )
        output = _submit(swe, episode, "")
    finally:
        asyncio.run(swe.end_session(episode))
    assert output.reward == 1.0, output.metadata
    tests = output.metadata["tests"]
    assert tests["tests/test_error.py::test_module_name"] == "passed"
    assert set(tests) == {*task["FAIL_TO_PASS"], *task["PASS_TO_PASS"]}
    assert output.metadata["changed"] == ["tomli/__init__.py"]


def test_a_wrong_fix_fails_its_tests_and_says_which(swe: Environment) -> None:
    task = swe.split("test").task(0)
    episode = Episode(task=task)
    try:
        asyncio.run(
            swe.call_tool(
                episode,
                "edit_file",
                {"path": "tomli/__init__.py", "start_line": 1, "end_line": 1, "new_text": "raise OSError"},
            )
        )
        output = _submit(swe, episode, "")
    finally:
        asyncio.run(swe.end_session(episode))
    assert output.reward == 0.0
    assert output.metadata["fail_to_pass"] == {"passed": 0, "total": 1}
    assert output.metadata["pass_to_pass"] == {"passed": 0, "total": len(task["PASS_TO_PASS"])}
    assert "1 of 1 FAIL_TO_PASS tests fail" in output.metadata["reason"]


def test_a_patch_that_does_not_apply_earns_nothing(swe: Environment) -> None:
    bad = "--- a/tomli/__init__.py\n+++ b/tomli/__init__.py\n@@ -1,1 +1,1 @@\n-no such line\n+x\n"
    output = _submit(swe, Episode(task=swe.split("test").task(0)), bad)
    assert output.reward == 0.0
    assert "does not apply" in output.metadata["reason"]


def test_the_container_exploits_earn_nothing(swe: Environment) -> None:
    cases = [c for c in hack_cases(swe, sample=1) if c.calls]
    assert sorted({c.label for c in cases}) == sorted(CONTAINER_HACKS)
    results = run_cases(swe, cases)
    assert {r.case.label: r.reward or 0.0 for r in results} == dict.fromkeys(CONTAINER_HACKS, 0.0)


def test_protected_paths_keep_their_base_content() -> None:
    import io
    import tarfile

    def tar(files: dict[str, bytes]) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    base = tar({"pkg/mod.py": b"x = 1\n", "tests/test_mod.py": b"def test(): assert False\n"})
    agent = tar(
        {
            "./pkg/mod.py": b"x = 2\n",
            "./tests/test_mod.py": b"def test(): pass\n",
            "./pkg/conftest.py": b"evil\n",
            "./pytest.py": b"evil\n",
            "./.git/hooks/post-checkout": b"evil\n",
            "./setup.py": b"new\n",
        }
    )
    test_patch = "--- a/tests/test_new.py\n+++ b/tests/test_new.py\n"
    built = build_tree(base, agent, "", "")
    tree = read_tar(built.tar, "built")
    assert tree["pkg/mod.py"][1] == b"x = 2\n" and tree["setup.py"][1] == b"new\n"
    assert tree["tests/test_mod.py"][1] == b"def test(): assert False\n"
    assert "pkg/conftest.py" not in tree and "pytest.py" not in tree
    assert not any(p.startswith(".git") for p in tree)
    assert built.changed == ["pkg/mod.py", "setup.py"]
    assert built.reverted == ["pkg/conftest.py", "pytest.py", "tests/test_mod.py"]
    assert patch_paths(test_patch) == {"tests/test_new.py"}
    assert is_protected("docs/anything.txt", [], {"docs/anything.txt"})
    # the grader's own file goes into the same archive (read-only to others), over any file the
    # agent made with its name
    forged = tar({"./.nonce": b"forged\n", "./pkg/mod.py": b"x = 2\n"})
    built = build_tree(base, forged, "", "", files={".nonce": b"n0nce"})
    with tarfile.open(fileobj=io.BytesIO(built.tar)) as archive:
        member = archive.getmember(".nonce")
        assert member.mode == 0o600 and archive.extractfile(member).read() == b"n0nce"  # type: ignore[union-attr]
        assert archive.getnames().count(".nonce") == 1
