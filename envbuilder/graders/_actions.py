"""The ``actions`` grader: the agent made the task's gold tool calls.

Each gold call must be matched by a distinct call the agent made that did not fail: the same
tool, and the same arguments (all of them, or only the keys listed for that tool). With
``ordered`` the matches must come in the gold order (other calls may come between them).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from envbuilder.graders._base import FieldUse, Grade, Grader, GraderConfig, Task
from envbuilder.graders._trajectory import TRAJECTORY, Call, Trajectory, gold_calls


class ActionsConfig(GraderConfig):
    """Correct when the agent made every gold call (in order or not; arguments exact or by key)."""

    type: Literal["actions"]
    actions: str = "actions"
    """The task field holding the gold calls: a list (or JSON text) of `{name, arguments}`."""
    tools: list[str] | None = None
    """Check only the gold calls of these tools (e.g. the ones that change the state, so an
    agent may look things up its own way). Default: every gold call."""
    ordered: bool = False
    """The matching calls must come in the gold order."""
    keys: dict[str, list[str]] = Field(default_factory=dict)
    """Per tool, the only arguments compared (e.g. `{transfer_to_human_agents: []}`: the
    summary is free text). Tools not listed compare every argument."""


class ActionsGrader(Grader):
    Config = ActionsConfig
    config: ActionsConfig

    def field_uses(self) -> list[FieldUse]:
        return [FieldUse(("actions",), frozenset({self.config.actions}), named=True)]

    def missing_target(self, task: Task) -> str | None:
        if self.config.actions not in task:
            return f"the task has no field {self.config.actions!r} (its gold calls)"
        return None

    def _same(self, gold: Call, made: Call) -> bool:
        if gold["name"] != made["name"]:
            return False
        keys = self.config.keys.get(gold["name"])
        args: dict[str, Any] = made.get("input") or {}
        if keys is None:
            return bool(gold["arguments"] == args)
        return all(gold["arguments"].get(k) == args.get(k) for k in keys)

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        trajectory = task.get(TRAJECTORY)
        if not isinstance(trajectory, Trajectory):
            return Grade.ungradeable("the actions grader needs an episode's calls")
        try:
            gold = gold_calls(task.get(self.config.actions))
        except ValueError as exc:
            return Grade.ungradeable(f"the task's gold calls cannot be read: {exc}")
        if self.config.tools is not None:
            gold = [g for g in gold if g["name"] in self.config.tools]
        made = [c for c in trajectory.calls if not c.get("error")]
        used = [False] * len(made)
        missing: list[str] = []
        start = 0
        for g in gold:
            found = next(
                (
                    i
                    for i in range(start if self.config.ordered else 0, len(made))
                    if not used[i] and self._same(g, made[i])
                ),
                None,
            )
            if found is None:
                missing.append(g["name"])
                continue
            used[found] = True
            start = found + 1
        details = {"expected_calls": len(gold), "matched": len(gold) - len(missing), "missing": missing}
        if missing:
            return Grade.incorrect(f"{len(missing)} of {len(gold)} expected calls were not made", **details)
        return Grade.correct(f"all {len(gold)} expected calls were made", **details)
