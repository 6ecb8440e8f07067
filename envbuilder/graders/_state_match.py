"""The ``state_match`` grader: the episode's final state equals the one its gold actions reach.

The task's gold actions are replayed with the same tools on a fresh copy of the task's initial
state, and the two final states are compared (a replay through a broken tool reaches no gold state:
the grade is then void, naming the first such call): the whole document, or only the `paths`
listed.
Only what either episode changed needs comparing (both start from the same document), so the
check costs what the episodes changed, not the database's size. The metadata lists the first
differences (``diff``: path, expected, got); it holds gold values, so the agent sees it only
when the spec reveals answers.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from envbuilder.graders._base import FieldUse, Grade, Grader, GraderConfig, Task
from envbuilder.graders._trajectory import BROKE, TRAJECTORY, Trajectory, gold_calls
from envbuilder.world import MISSING, changed_paths


class StateMatchConfig(GraderConfig):
    """Correct when the final state equals the state the task's gold actions lead to."""

    type: Literal["state_match"]
    actions: str = "actions"
    """The task field holding the gold actions: a list (or JSON text) of `{name, arguments}`."""
    paths: list[str] | None = None
    """Compare only these parts: a top-level key (`orders`) or an item (`orders/#W1`).
    Default: the whole document."""
    max_diff: int = Field(default=20, ge=1, le=1000)
    """Differences listed in the metadata at most."""


class StateMatchGrader(Grader):
    Config = StateMatchConfig
    config: StateMatchConfig
    needs_state = True

    def field_uses(self) -> list[FieldUse]:
        return [FieldUse(("actions",), frozenset({self.config.actions}), named=True)]

    def missing_target(self, task: Task) -> str | None:
        if self.config.actions not in task:
            return f"the task has no field {self.config.actions!r} (its gold actions)"
        return None

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        trajectory = task.get(TRAJECTORY)
        if not isinstance(trajectory, Trajectory) or trajectory.replay is None or trajectory.document is None:
            return Grade.ungradeable("state_match needs an episode with `state:` to compare")
        try:
            gold = gold_calls(task.get(self.config.actions))
        except ValueError as exc:
            return Grade.ungradeable(f"the task's gold actions cannot be read: {exc}")
        expected, failures = await trajectory.replay(gold)
        broken = [f for f in failures if BROKE in f]
        if broken:
            # A gold replay through a broken tool reaches no gold state: comparing with it would
            # pay an episode that failed the same way. The environment's failure: void. (A gold
            # call the tool refuses by its rules is part of the gold, as in τ²'s trajectories.)
            # The reason names the call by position and tool only (its arguments are gold).
            first = broken[0].split(":", 1)[0]
            return Grade.failed(
                f"the gold actions could not be replayed ({len(broken)} of {len(gold)} calls broke, "
                f"first {first}), so the final state cannot be compared",
                gold_errors=failures[:5],
            )
        got = trajectory.state or {}
        diff: list[dict[str, Any]] = []
        for key, (mine, theirs) in changed_paths(trajectory.document, got, expected).items():
            if self._selected(key) and mine != theirs:
                _diff("/".join(key), theirs, mine, diff, self.config.max_diff)
        details: dict[str, Any] = {"diff": diff}
        if failures:
            details["gold_errors"] = failures[:5]
        if not diff:
            return Grade.correct("the final state matches the gold actions' state", **details)
        more = "" if len(diff) < self.config.max_diff else " (or more)"
        return Grade.incorrect(
            f"the final state differs from the expected state in {len(diff)}{more} places", **details
        )

    def _selected(self, key: tuple[str, ...]) -> bool:
        paths = self.config.paths
        if paths is None:
            return True
        for path in paths:
            parts = tuple(path.strip("/").split("/"))
            if key[: len(parts)] == parts[: len(key)]:
                return True
        return False


def _diff(path: str, expected: Any, got: Any, out: list[dict[str, Any]], limit: int) -> None:
    """Append the differences between two JSON values, deepest first found, up to ``limit``."""
    if len(out) >= limit or expected == got:
        return
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in dict.fromkeys([*expected, *got]):
            _diff(f"{path}/{key}", expected.get(key, MISSING), got.get(key, MISSING), out, limit)
        return
    if isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            _diff(f"{path}/{i}", e, g, out, limit)
        return
    out.append({"path": path, "expected": _shown(expected), "got": _shown(got)})


def _shown(value: Any) -> Any:
    return "<missing>" if value is MISSING else value
