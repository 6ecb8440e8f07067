"""The ``harbor_tests`` grader: a Harbor task graded by its own ``tests/test.sh``.

When the agent submits (the answer's text is not read: the work is in the container):

1. the session's container is stopped (every process the agent started ends) and its working
   folder copied out; nothing else of it is kept;
2. the tests enter a *fresh* container of the task's image only now, with the agent's working
   folder, no network and a fresh, empty, root-owned ``/logs/verifier`` (see
   :mod:`envbuilder.isolation.sandbox._verifier`);
3. ``bash /tests/test.sh`` runs as ``[verifier] user`` (root by default, as in Harbor) with its
   ``env``, within ``timeout_sec``; then the container is stopped and the verdict folder copied
   out by the engine;
4. the reward is read as Harbor reads it: ``reward.json`` when present (an object of numbers:
   its ``reward``, or its only value; or a number), else ``reward.txt`` (one number). Every
   value goes into the metadata.

A verdict outside [0, 1], a missing, empty or unreadable reward file, an engine failure or a
script past its deadline is a failure outside the answer: void (null reward), never 0, as
Harbor marks such a trial an error.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any, Literal

from envbuilder.errors import SandboxError
from envbuilder.graders._base import FieldUse, Grade, Grader, GraderConfig, Outcome, Task
from envbuilder.graders._trajectory import TRAJECTORY, Trajectory
from envbuilder.isolation.sandbox._result import Status
from envbuilder.isolation.sandbox._verifier import VerifierRun, run_verifier


class HarborTestsConfig(GraderConfig):
    """Run the task's Harbor tests (`tests/test.sh`) on the agent's working folder in a fresh
    container and read the reward file they write (`/logs/verifier/reward.json` or `reward.txt`)."""

    type: Literal["harbor_tests"]
    tests: str = "tests"
    """The task field holding the tests folder (a tar as base64 text; the `harbor` dataset's
    `tests`)."""
    verifier: str = "verifier"
    """The task field holding the verifier's settings: JSON text of `{timeout_sec, user, env}`."""


class HarborTestsGrader(Grader):
    Config = HarborTestsConfig
    config: HarborTestsConfig
    blocking = True
    compares_target = False
    empty_earns_nothing = True

    def field_uses(self) -> list[FieldUse]:
        return [
            FieldUse((key,), frozenset({getattr(self.config, key)}), named=True)
            for key in ("tests", "verifier")
        ]

    def missing_target(self, task: Task) -> str | None:
        return None if task.get(self.config.tests) else f"the task has no `{self.config.tests}`"

    async def grade(self, answer: str, task: Task, secrets_: dict[str, str]) -> Grade:
        trajectory = task.get(TRAJECTORY)
        workspace = trajectory.workspace if isinstance(trajectory, Trajectory) else None
        if workspace is None:
            return Grade.failed("harbor_tests needs a spec with `sandbox:`")
        try:
            tests = base64.b64decode(str(task.get(self.config.tests) or ""), validate=True)
            settings = json.loads(str(task.get(self.config.verifier) or "{}"))
            timeout = float(settings.get("timeout_sec") or 600)
            user = int(settings.get("user") or 0)
            env = {str(k): str(v) for k, v in (settings.get("env") or {}).items()}
        except (binascii.Error, ValueError, TypeError, AttributeError) as exc:
            return Grade.failed(f"the task's tests or verifier settings are unreadable: {exc}")
        if any("${" in v for v in env.values()):
            return Grade.failed("the verifier's env names host variables (${...}), which are not passed")
        containers = workspace.containers
        try:
            image = await containers.image(task)
            tree = await containers.snapshot(workspace.name) if workspace.name else None
            run = await run_verifier(
                containers, image, tree, tests, ["bash", "/tests/test.sh"],
                user=user, timeout=timeout, env=env, task=task,
            )  # fmt: skip
        except SandboxError as exc:
            return Grade.failed(f"the tests could not run: {exc.message}")
        return verdict(run)


def verdict(run: VerifierRun) -> Grade:
    """The grade a verifier run's reward files give (Harbor's rule; see the module docstring)."""
    result = run.result
    details: dict[str, Any] = {
        "tests": {"exit_code": result.exit_code, "status": str(result.status)},
        "output": (result.stdout + result.stderr)[-4000:],
    }
    if result.status == Status.TIMEOUT:
        return Grade.failed("the tests ran past their time limit", **details)
    try:
        rewards = _rewards(run)
    except ValueError as exc:
        return Grade.failed(str(exc), **details)
    details["rewards"] = rewards
    if "reward" in rewards:
        value = rewards["reward"]
    elif len(rewards) == 1:
        value = next(iter(rewards.values()))
    else:
        return Grade.failed(f"reward.json holds {len(rewards)} rewards and none is named `reward`", **details)
    if not 0 <= value <= 1:
        return Grade.failed(f"the tests' reward {value} is outside [0, 1]", **details)
    if value == 1:
        return Grade.correct("the tests pass (reward 1)", **details)
    if value == 0:
        return Grade.incorrect("the tests fail (reward 0)", **details)
    return Grade(Outcome.CORRECT, value, f"the tests give reward {value}", details)


def _rewards(run: VerifierRun) -> dict[str, float]:
    """The rewards of ``reward.json`` (first) or ``reward.txt``, as Harbor reads them.

    Raises:
        ValueError: neither file, an empty or unreadable one, or a value that is no finite number.
    """
    for name in ("reward.json", "reward.txt"):
        if name in run.oversized:
            raise ValueError(f"the tests' {name} is larger than 64 KiB")
    if "reward.json" in run.files:
        text = run.files["reward.json"].decode("utf-8", "replace")
        if not text.strip():
            raise ValueError("the tests wrote an empty reward.json")
        try:
            parsed = json.loads(text)
        except ValueError:
            raise ValueError(f"the tests' reward.json is not JSON: {text[:80]!r}") from None
        values = parsed if isinstance(parsed, dict) else {"reward": parsed}
        out = {}
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"the tests' reward.json holds a reward that is no finite number: {value!r}")
            out[str(key)] = float(value)
        if not out:
            raise ValueError("the tests' reward.json holds no reward")
        return out
    if "reward.txt" in run.files:
        text = run.files["reward.txt"].decode("utf-8", "replace").strip()
        if not text:
            raise ValueError("the tests wrote an empty reward.txt")
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"the tests' reward.txt is not a number: {text[:80]!r}") from None
        if not math.isfinite(value):
            raise ValueError(f"the tests' reward.txt is not finite: {text[:80]!r}")
        return {"reward": value}
    raise ValueError("the tests wrote no reward file (/logs/verifier/reward.txt or reward.json)")
