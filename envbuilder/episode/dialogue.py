"""Dialogues that unfold: the later user turns of a task, and what graders see of the dialogue.

The prompt presents the first user turn; each reply through the answer tool reveals the next
turn as the tool's output, until the last turn is answered. The episode keeps only the replies
(``Episode.replies``, plain strings): the user turns are recomputed from the task when needed,
so a session stays small.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from envbuilder.data import Task
from envbuilder.errors import DataError
from envbuilder.spec import DialogueSpec
from envbuilder.templating import Template

__all__ = ["DIALOGUE_VARIABLES", "Dialogue"]


DIALOGUE_VARIABLES = frozenset({"turn", "user_turns", "replies", "transcript"})
"""Names a grader's templates (and later turns) may use in a dialogue besides the task's fields:
the 0-based index of the reply being graded, the user turns and replies up to it, and the
dialogue as `User: ...` / `Assistant: ...` text."""


class Dialogue:
    """The later user turns of a spec's ``dialogue:`` and the grading context of a reply."""

    def __init__(self, spec: DialogueSpec, base_dir: Path | None, first_turn: Callable[[Task], str]):
        self.spec = spec
        self._first_turn = first_turn
        self._templates = [
            Template(t, name=f"dialogue.turns[{i}]", base_dir=base_dir)
            for i, t in enumerate(spec.turns or ())
        ]

    @property
    def fields(self) -> frozenset[str]:
        """The task fields the dialogue reads."""
        if self.spec.column is not None:
            return frozenset({self.spec.column})
        return frozenset().union(*(t.variables for t in self._templates)) - DIALOGUE_VARIABLES

    def variables(self) -> dict[tuple[str | int, ...], frozenset[str]]:
        """Each turn template's variables by its key path (checked against the data)."""
        return {
            ("dialogue", "turns", i): t.variables - DIALOGUE_VARIABLES for i, t in enumerate(self._templates)
        }

    def _column(self, task: Task) -> list[str]:
        assert self.spec.column is not None
        value = task.get(self.spec.column)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                value = None
        if not isinstance(value, Sequence) or isinstance(value, str) or not value:
            raise DataError(
                f"dialogue.column {self.spec.column!r} must hold a non-empty list of user turns",
                hint=f"got {type(value).__name__}",
            )
        return [str(v) for v in value]

    def count(self, task: Task) -> int:
        """How many user turns the agent answers."""
        if self.spec.column is not None:
            return len(self._column(task))
        return 1 + len(self._templates)

    @property
    def inline(self) -> bool:
        """Whether its turn templates only show fields (else they render off the event loop)."""
        return all(t.bounded for t in self._templates)

    def user_turns(self, task: Task, replies: Sequence[str]) -> list[str]:
        """The user turns shown up to the one after ``replies`` (the first is the prompt)."""
        shown = min(len(replies) + 1, self.count(task))
        if self.spec.column is not None:
            return self._column(task)[:shown]
        turns = [self._first_turn(task)]
        for i in range(1, shown):
            turns.append(self._templates[i - 1].render({**task, "replies": list(replies[:i])}).strip())
        return turns

    def context(self, task: Task, replies: Sequence[str]) -> Task:
        """The task as a grader of the last of ``replies`` sees it (dialogue variables added)."""
        users = self.user_turns(task, replies[:-1])
        lines = []
        for user, reply in zip(users, replies, strict=False):
            lines += [f"User: {user}", f"Assistant: {reply}"]
        return {
            **task,
            "turn": len(replies) - 1,
            "user_turns": users,
            "replies": list(replies),
            "transcript": "\n\n".join(lines),
        }
