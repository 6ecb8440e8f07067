"""What graders of agents read of an episode: its final state, the calls it made, its messages.

A grader that needs them (``state_match``, ``actions``, ``communicated``) finds a
:class:`Trajectory` in its task context under :data:`TRAJECTORY` (the episode puts it there when
it grades); a grader given none says the answer is ungradeable, with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envbuilder.world import Changes, Document

if TYPE_CHECKING:
    from envbuilder.isolation.sandbox import Workspace

__all__ = ["TRAJECTORY", "Call", "Trajectory", "gold_calls"]

TRAJECTORY = "trajectory"

BROKE = "the tool broke"
"""Words in a call's error when the tool itself failed (an exception outside its contract), not
the call's request: a gold replay with such a call reaches no gold state."""
"""The key of the grading context holding the :class:`Trajectory` (not a task field)."""

Call = dict[str, Any]
"""One tool call: ``{"name": ..., "arguments": {...}}`` (gold) or, as made, with ``output``
and ``error`` too."""


@dataclass(frozen=True)
class Trajectory:
    """An episode as agent graders see it."""

    calls: list[Call] = field(default_factory=list)
    """The calls made, in order, except the answer tool's (failed ones included, with
    ``error: true``): the agent's (``by: "agent"``) and the simulated user's with its own
    tools (``by: "user"``, dual control)."""
    messages: list[str] = field(default_factory=list)
    """What the agent said to the user: its messages through the answer tool, in order."""
    user_messages: list[str] = field(default_factory=list)
    """What the (simulated) user said, in order."""
    state: Changes | None = None
    """The episode's final changes to the state document (None without `state:`)."""
    document: Document | None = None
    """The initial state document the changes apply to."""
    replay: Callable[[list[Call]], Awaitable[tuple[Changes, list[str]]]] | None = None
    """Run calls with the same tools on a fresh copy of the task's initial state: the final
    changes and the errors of calls that failed."""
    workspace: Workspace | None = None
    """The session's container (a spec's `sandbox:`; its name is None when no tool made one)."""


def gold_calls(value: Any) -> list[Call]:
    """A task field's gold calls: a list (or JSON text of one) of ``{name, arguments}``.

    Raises:
        ValueError: the field is not such a list.
    """
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else []
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"expected a list of {{name, arguments}}, got {type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ValueError(f"item {i} is not {{name, arguments}}")
        args = item.get("arguments") or {}
        if isinstance(args, str):
            args = json.loads(args)
        if not isinstance(args, dict):
            raise ValueError(f"the arguments of item {i} are not an object")
        out.append({"name": item["name"], "arguments": args})
    return out
