"""Few-shot examples: a fixed selection from a split, never including the task being asked."""

from __future__ import annotations

import functools
import random
from typing import Any

from envbuilder.data import SplitView, Task
from envbuilder.spec import FewShotSpec
from envbuilder.templating import Template

__all__ = ["FewShot"]


class FewShot:
    """Chooses ``spec.n`` examples from ``view`` for a task and renders their answers.

    The selection is made once (first N, or a seeded sample) with one spare, so that when the
    task asked is itself among the candidates it is skipped and N examples remain. A candidate
    is the asked task when its ``id`` equals the task's, or when the two are equal as JSON.
    """

    def __init__(self, spec: FewShotSpec, view: SplitView, answer: Template):
        self.spec = spec
        self.view = view
        self.answer = answer

    @functools.cached_property
    def _candidates(self) -> list[Task]:
        size = len(self.view)
        want = min(self.spec.n + 1, size)
        if self.spec.select == "first":
            return self.view.task_range(0, want)
        picks = sorted(random.Random(self.spec.seed).sample(range(size), want))
        return [self.view.task(i) for i in picks]

    def examples(self, task: Task) -> list[Task]:
        """The examples shown before ``task`` (fewer than N only if the split is that small)."""
        task_id = task.get("id")
        chosen = [ex for ex in self._candidates if not (ex.get("id") == task_id or ex == task)]
        return chosen[: self.spec.n]

    def render_answer(self, example: dict[str, Any]) -> str:
        return self.answer.render(example)
