"""The README's first screen tells the truth: its commands are the ones CI and users run."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from envbuilder import __version__
from envbuilder.cli import app

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")


def test_readme_has_install_serve_and_test_commands() -> None:
    assert "$ pip install -e . && envbuilder serve envs/gsm8k.yaml" in README
    assert re.search(r"^\$ pip install -e '\.\[dev\]' && python -m pytest$", README, re.M)


def test_readme_serve_output_matches_the_cli(gsm8k) -> None:
    assert f"envbuilder: serving gsm8k ({gsm8k.summary()} tasks)" in README


def test_version_flag() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"envbuilder {__version__}"


def test_serve_bad_spec_exits_1_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    result = CliRunner().invoke(app, ["serve", str(bad)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "missing required key 'dataset'" in result.output


def test_readme_prompt_examples_are_valid_specs() -> None:
    import yaml

    from envbuilder.spec import PromptSpec

    section = README.split("## Prompts and conversations", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    assert len(blocks) == 3
    for block in blocks:
        PromptSpec.model_validate(yaml.safe_load(block)["prompt"])


_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")


def _curl_steps(section: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs of the first ``` block of a README section."""
    block = re.search(r"```\n(.*?)```", section, re.S)
    assert block is not None
    steps: list[tuple[str, str]] = []
    for chunk in re.split(r"^\$ ", block.group(1), flags=re.M)[1:]:
        lines = chunk.split("\n")
        command = lines.pop(0)
        while command.endswith("\\"):
            command = command[:-1] + " " + lines.pop(0).strip()
        steps.append((command, "\n".join(lines).strip()))
    return steps


def test_readme_curl_walkthrough_is_what_the_server_answers(gsm8k_url: str) -> None:
    import shlex

    import httpx

    section = README.split("## One episode with curl", 1)[1].split("\n## ", 1)[0]
    sid = ""
    steps = _curl_steps(section)
    assert steps[0][0].startswith("curl") and len(steps) == 6
    for command, expected in steps:
        if command.startswith("SID="):
            continue
        words = shlex.split(command.replace("$SID", sid))
        method = words[words.index("-X") + 1] if "-X" in words else "GET"
        url = next(w for w in words if w.startswith("localhost:8080"))
        headers = dict(words[i + 1].split(": ", 1) for i, w in enumerate(words) if w == "-H")
        data = words[words.index("-d") + 1] if "-d" in words else None
        r = httpx.request(method, gsm8k_url + url[len("localhost:8080") :], headers=headers, content=data)
        got = r.text.replace("\r\n", "\n").strip()
        if "create_session" in url:
            sid = _ID.findall(got)[0]
        assert _normal(got) == _normal(expected), command


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in _ID.sub("<id>", text).splitlines())


def test_readme_generated_spec_serves_and_grades(tmp_path: Path) -> None:
    import asyncio

    import pytest

    pytest.importorskip("reasoning_gym")
    from envbuilder.environment import Environment
    from envbuilder.spec import parse_spec

    section = README.split("## Generated tasks", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```yaml\n(.*?)```", section, re.S)[0]
    env = Environment(parse_spec(block, file="reasoning.yaml", base_dir=tmp_path))
    assert len(env.split("train")) == 10**9 - 1000
    task = env.split("test").task(3)
    assert task["difficulty"] == "hard" and task["family"] in {"chain_sum", "spell_backward"}
    assert env.submit is not None
    grade = asyncio.run(env.submit.grader.grade(task["answer"], task, {}))
    assert grade.score == 1.0


def test_readme_train_with_sections_run(monkeypatch) -> None:
    """Each "Train with" section's Python runs as shown (from the repository's root) and prints
    what its comments say."""
    import contextlib
    import io

    monkeypatch.chdir(Path(__file__).parent.parent)
    sections = README.split("\n### Train with ")[1:]
    ran = 0
    for section in sections:
        section = section.split("\n## ", 1)[0]
        for block in re.findall(r"```python\n(.*?)```", section, re.S):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(block, f"README: Train with {section.split()[0]}", "exec"), {})
            expected = [m.group(1).strip() for m in re.finditer(r"print\(.*\)[ \t]+# (.+)$", block, re.M)]
            printed = out.getvalue().splitlines()
            for want in expected:
                assert any(line.strip() == want for line in printed), (want, printed)
            ran += 1
    assert ran == 4


def test_readme_agent_example_is_a_valid_spec_over_the_shipped_data() -> None:
    import yaml

    from envbuilder.environment import Environment
    from envbuilder.spec import parse_spec
    from tests.conftest import ENVS

    section = README.split("## Agents: a world with state", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    spec = yaml.safe_load((ENVS / "tau2_retail.yaml").read_text())
    spec.update(yaml.safe_load(block))
    env = Environment(parse_spec(yaml.safe_dump(spec), file="readme.yaml", base_dir=ENVS))
    assert [t.name for t in env.tools_listing.tools] == [
        "send_message",
        "get_order_details",
        "cancel_pending_order",
    ]
    assert env.document is not None and env.submit is not None and env.submit.user is not None
