"""The ``repo_tests`` grader: a repository task (the SWE-bench shape) graded by its own tests.

A task holds a repository at a base commit (the spec's ``sandbox: repository:``), a problem
statement, a hidden ``test_patch``, the tests that must go from failing to passing
(``FAIL_TO_PASS``) and those that must keep passing (``PASS_TO_PASS``). The agent works in the
session's container; when it submits (its answer may also be a unified diff, as SWE-bench
predictions are):

1. the session's container is stopped: every process the agent started is gone;
2. its working folder is copied out and, on the server, what differs from the base tree is
   taken, except protected paths (tests, ``conftest.py``, runner configuration: see
   :mod:`._repo_tree`); the answer's patch goes on top, then the hidden test patch;
3. the tests run with pytest in a *fresh* container of the image, with no network, as the
   agent's uid; a plugin envbuilder puts there reports each test's outcome on a nonce-marked
   line, and the server reads those lines (never a file in the container);
4. the reward follows the SWE-bench rule: 1 when every FAIL_TO_PASS test and every
   PASS_TO_PASS test passed, else 0; each test's outcome is in the grade's metadata.

A failure outside the agent's work (the engine, a test patch that does not apply to the base, a
runner that never started) is ungradeable (void), never 0.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from importlib import resources
from typing import Any, Literal

from pydantic import Field

from envbuilder.errors import GraderError, SandboxError
from envbuilder.graders._base import FieldUse, Grade, Grader, GraderConfig, Task
from envbuilder.graders._repo_tree import PROTECTED, PatchFailed, build_tree
from envbuilder.graders._trajectory import TRAJECTORY, Trajectory

_PLUGIN_DIR = "/opt/envbuilder-report"
_NONCE_FILE = ".envbuilder-report-nonce"
PASSING = frozenset({"passed", "xfailed"})
#: pytest from the image's own packages (``-I``: the working folder is not on the path yet, so a
#: ``pytest.py`` of the repository cannot stand in for it), then the folder as ``python -m`` has it.
_RUNNER = (
    f"import sys; sys.path.insert(0, {_PLUGIN_DIR!r}); import pytest, envbuilder_report; "
    "sys.path.insert(0, ''); sys.exit(pytest.main())"
)


class RepoTestsConfig(GraderConfig):
    """Apply the hidden test patch to the agent's repository and run the named tests in a fresh
    container; full reward when all FAIL_TO_PASS and PASS_TO_PASS tests pass (SWE-bench)."""

    type: Literal["repo_tests"]
    test_patch: str = "test_patch"
    """The task field holding the hidden test patch (a unified diff)."""
    fail_to_pass: str = "FAIL_TO_PASS"
    """The task field listing the tests (pytest node ids) that must pass after the fix: a list or
    JSON text of one."""
    pass_to_pass: str = "PASS_TO_PASS"
    """The task field listing the tests that must keep passing."""
    protected: list[str] = Field(default_factory=lambda: list(PROTECTED))
    """Paths (globs; a name without `/` matches in any folder) whose changes by the agent never
    reach the tests; the test patch's own files are always protected."""
    timeout_seconds: float = Field(default=600, gt=0, le=3600)
    """Wall time of the test run."""
    pytest_args: list[str] = Field(default_factory=lambda: ["-p", "no:cacheprovider", "-q"])
    """Arguments given to pytest before the test files."""


class RepoTestsGrader(Grader):
    Config = RepoTestsConfig
    config: RepoTestsConfig
    blocking = True
    compares_target = False

    def field_uses(self) -> list[FieldUse]:
        keys = ("test_patch", "fail_to_pass", "pass_to_pass")
        return [FieldUse((key,), frozenset({getattr(self.config, key)}), named=True) for key in keys]

    def missing_target(self, task: Task) -> str | None:
        for name in (self.config.test_patch, self.config.fail_to_pass):
            if not task.get(name):
                return f"the task has no `{name}`"
        return None

    async def grade(self, answer: str, task: Task, secrets_: dict[str, str]) -> Grade:
        trajectory = task.get(TRAJECTORY)
        workspace = trajectory.workspace if isinstance(trajectory, Trajectory) else None
        if workspace is None or workspace.spec.repository is None:
            return Grade.ungradeable("repo_tests needs a spec with `sandbox: repository:`")
        try:
            f2p = _tests(task.get(self.config.fail_to_pass), self.config.fail_to_pass)
            p2p = _tests(task.get(self.config.pass_to_pass), self.config.pass_to_pass)
        except ValueError as exc:
            return Grade.ungradeable(str(exc))
        test_patch = str(task.get(self.config.test_patch) or "")
        containers = workspace.containers
        nonce = secrets.token_hex(16)
        try:
            base = await workspace.base_tree()
            assert base is not None
            agent = await containers.snapshot(workspace.name) if workspace.name else None
        except SandboxError as exc:
            return Grade.ungradeable(f"the repository or the session's container failed: {exc.message}")
        try:
            built = await asyncio.to_thread(
                build_tree, base, agent, _patch_of(answer), test_patch, self.config.protected,
                {_NONCE_FILE: nonce.encode()},
            )  # fmt: skip
        except PatchFailed as exc:
            if exc.code == "test_patch":
                return Grade.ungradeable(f"the task is broken: {exc.message}")
            return Grade.incorrect(exc.message, tests={})
        except GraderError as exc:
            return Grade.ungradeable(exc.message)
        files = sorted({t.split("::", 1)[0] for t in [*f2p, *p2p]})
        plugin = resources.files("envbuilder.graders").joinpath("_report_plugin.py").read_bytes()
        try:
            result = await containers.run_fresh(
                built.tar,
                [
                    "sh",
                    "-c",
                    # The report on fd 3; pytest's own output only as a bounded tail after it.
                    'exec 3>&1; python3 -I -c "$0" "$@" 2>&1 | tail -c 20000',
                    _RUNNER,
                    "-p",
                    "envbuilder_report",
                    *self.config.pytest_args,
                    "--",
                    *files,
                ],
                files={f"{_PLUGIN_DIR}/envbuilder_report.py": plugin},
                timeout=self.config.timeout_seconds,
                env={
                    "ENVBUILDER_REPORT": f"{containers.spec.workdir.rstrip('/')}/{_NONCE_FILE}",
                    "PYTHONDONTWRITEBYTECODE": "1",
                },
            )
        except SandboxError as exc:
            return Grade.ungradeable(f"the tests could not run: {exc.message}")
        started, outcomes = _read_report(result.stdout, nonce)
        if not started:
            said = (result.stderr or result.stdout).strip()[-300:]
            return Grade.ungradeable(f"the test runner did not start ({result.describe()}): {said}")
        tests = {t: outcomes.get(t, "missing") for t in [*f2p, *p2p]}
        failing = [t for t in f2p if tests[t] not in PASSING]
        broken = [t for t in p2p if tests[t] not in PASSING]
        details: dict[str, Any] = {
            "tests": tests,
            "fail_to_pass": {"passed": len(f2p) - len(failing), "total": len(f2p)},
            "pass_to_pass": {"passed": len(p2p) - len(broken), "total": len(p2p)},
            "changed": built.changed[:200],
            "run": result.stdout[-4000:],
        }
        if built.reverted:
            details["reverted"] = built.reverted[:200]
        if not failing and not broken:
            return Grade.correct(f"all {len(f2p) + len(p2p)} tests pass", **details)
        reason = (f"{len(failing)} of {len(f2p)} FAIL_TO_PASS tests fail" if failing else "") + (
            f"{'; ' if failing else ''}{len(broken)} of {len(p2p)} PASS_TO_PASS tests fail" if broken else ""
        )
        return Grade.incorrect(reason, **details)


def _tests(value: Any, name: str) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(f"the task's `{name}` is not a JSON list of test ids") from None
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise ValueError(f"the task's `{name}` is not a list of test ids")
    return list(dict.fromkeys(value))


def _patch_of(answer: str) -> str:
    """The unified diff in an answer (a bare diff, or one in a fenced block); '' when none."""
    text = answer.strip()
    if "```" in text:
        blocks = text.split("```")[1::2]
        diffs = [b.split("\n", 1)[1] if "\n" in b else "" for b in blocks]
        text = next((d for d in diffs if "--- " in d or "diff --git" in d), "")
    if "diff --git" not in text and not ("--- " in text and "+++ " in text):
        return ""
    return text + "\n"


def _read_report(stdout: str, nonce: str) -> tuple[bool, dict[str, str]]:
    """Whether the runner started, and each test's last outcome (an error wins over a pass)."""
    started = False
    outcomes: dict[str, str] = {}
    prefix = nonce + " "
    for line in stdout.splitlines():
        if not line.startswith(prefix):
            continue
        words = line[len(prefix) :].split(" ", 1)
        if words[0] == "start":
            started = True
        elif len(words) == 2 and words[0] != "finish":
            outcome, test = words
            if outcomes.get(test) not in ("error", "failed"):
                outcomes[test] = outcome
    return started, outcomes
