"""The ``communicated`` grader: each required piece of information reached the user.

The pieces are a task field (a list of strings, or JSON text of one); each must appear in what
the agent said to the user (its messages, and its final answer), compared case-blind and with
thousands separators ignored (``1,234.5`` counts as ``1234.5``).
"""

from __future__ import annotations

import json
from typing import Literal

from envbuilder.graders._base import FieldUse, Grade, Grader, GraderConfig, Task
from envbuilder.graders._trajectory import TRAJECTORY, Trajectory


class CommunicatedConfig(GraderConfig):
    """Correct when every required piece of information appears in the agent's messages."""

    type: Literal["communicated"]
    info: str = "communicate_info"
    """The task field listing the pieces of information (strings) the agent must tell."""


def _normal(text: str) -> str:
    return " ".join(text.lower().replace(",", "").split())


class CommunicatedGrader(Grader):
    Config = CommunicatedConfig
    config: CommunicatedConfig

    def field_uses(self) -> list[FieldUse]:
        return [FieldUse(("info",), frozenset({self.config.info}), named=True)]

    def missing_target(self, task: Task) -> str | None:
        if self.config.info not in task:
            return f"the task has no field {self.config.info!r}"
        return None

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        value = task.get(self.config.info)
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else []
            except ValueError:
                value = [value]
        if value is None:
            value = []
        if not isinstance(value, list):
            return Grade.ungradeable(f"the task's {self.config.info!r} is not a list")
        trajectory = task.get(TRAJECTORY)
        said = list(trajectory.messages) if isinstance(trajectory, Trajectory) else []
        if answer and answer not in said:
            said.append(answer)
        text = _normal("\n".join(said))
        missing = [str(v) for v in value if _normal(str(v)) not in text]
        details = {"required": len(value), "missing_count": len(missing)}
        if missing:
            return Grade.incorrect(f"{len(missing)} of {len(value)} required pieces were not said", **details)
        return Grade.correct(f"all {len(value)} required pieces were said", **details)
