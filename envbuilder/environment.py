"""A compiled spec: its splits and tasks, its prompt, its tools and grading, ready to serve."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from envbuilder.data import SplitView, Task
from envbuilder.data._build import open_splits
from envbuilder.episode import Episode, SubmitTool
from envbuilder.errors import DataError, EnvbuilderError, Problem, SpecError, TaskNotFound, TemplateError
from envbuilder.graders import GraderContext, graders
from envbuilder.prompting import Prompter
from envbuilder.protocol import (
    MESSAGE_BLOCK_TYPES,
    ContentBlock,
    ListToolsOutput,
    Message,
    RunToolError,
    RunToolSuccess,
    Split,
)
from envbuilder.spec import LoadedSpec, load_spec

__all__ = ["Environment", "Episode", "load_environment"]

#: Names a template may use besides the task's fields.
_JINJA_GLOBALS = frozenset({"letters", "range", "dict", "lipsum", "cycler", "joiner", "namespace", "loop"})


class Environment:
    """Everything a server needs to serve one spec; raises SpecError listing every problem."""

    def __init__(self, loaded: LoadedSpec):
        self.loaded = loaded
        spec = self.spec = loaded.spec
        self.name = spec.name
        problems: list[Problem] = []

        def fail(loc: tuple[str | int, ...], exc: EnvbuilderError) -> None:
            problems.append(loaded.locate(loc, exc.message, code=exc.code, hint=exc.hint))

        self.source, self.splits, errors = open_splits(spec, loaded.base_dir)
        for loc, exc in errors:
            fail(loc, exc)

        self.prompter: Prompter | None = None
        try:
            self.prompter = Prompter(spec.prompt, loaded.base_dir, splits=self.splits)
        except EnvbuilderError as exc:
            fail(("prompt",), exc)
        if self.prompter is not None:
            for loc, problem in self.prompter.check():
                fail(loc, problem)

        self.submit: SubmitTool | None = None
        try:
            grader = graders.for_config(spec.grader)(spec.grader, GraderContext(base_dir=loaded.base_dir))
            self.submit = SubmitTool(spec.submit, grader)
        except EnvbuilderError as exc:
            # A nested grader's error says where inside the block it is (`graders[1].type`).
            fail(("grader", *getattr(exc, "loc", ())), exc)

        used = dict(self.prompter.variables()) if self.prompter else {}
        if self.submit is not None:
            used[("grader",)] = self.submit.grader.fields
        self.task_fields: frozenset[str] = (
            (self.prompter.task_fields() if self.prompter else frozenset())
            | (self.submit.grader.fields if self.submit else frozenset())
        ) - _JINJA_GLOBALS
        """The task fields the prompt and the grader read: a client's `task_spec` must have them."""
        prompt_fields = self.prompter.task_fields() if self.prompter else frozenset()
        grader_fields = self.submit.grader.fields if self.submit else frozenset()
        private = spec.task.private
        self.private_fields: frozenset[str] = (
            frozenset(private) if private is not None else grader_fields - prompt_fields - {"id"}
        )
        """Task fields clients never see (the gold answer by default): see :meth:`public`."""
        if self.splits:
            fields = {f for view in self.splits.values() for f in view.shaper.fields}
            for loc, names in used.items():
                for var in sorted(set(names) - fields - _JINJA_GLOBALS):
                    fail(
                        loc,
                        TemplateError(
                            f"the template uses {var!r}, which the tasks lack",
                            hint=f"Task fields: {', '.join(sorted(fields))}",
                        ),
                    )
        if not problems and self.prompter is not None:
            for where, problem in self._check_budgets():
                fail(where, problem)
        if problems:
            raise SpecError(problems)
        assert self.prompter is not None and self.submit is not None
        self.tools_listing = ListToolsOutput(
            tools=[self.submit.tool_spec],
            terminal_tool=None,
            supports_score_group=False,
            message_block_types=MESSAGE_BLOCK_TYPES,
        )

    def _check_budgets(self) -> list[tuple[tuple[str | int, ...], EnvbuilderError]]:
        """Render the first task of each split, so a template that runs out of its time or size
        budget is reported when the spec loads (``validate``, ``check``, ``serve``), not when
        the first agent asks for it."""
        assert self.prompter is not None
        for name, view in self.splits.items():
            if len(view) == 0:
                continue
            try:
                self.prompter.messages(view.task(0))
            except TemplateError as exc:
                if exc.code == "template_budget":
                    return [
                        (("prompt",), TemplateError(f"split {name!r} row 0: {exc.message}", hint=exc.hint))
                    ]
            except EnvbuilderError:
                pass  # the data's own problems are reported where the data is checked
        return []

    # -- discovery -----------------------------------------------------------------------------

    def list_splits(self) -> list[Split]:
        return [Split(name=v.name, type=v.type) for v in self.splits.values()]  # type: ignore[arg-type]

    def split(self, name: str) -> SplitView:
        try:
            return self.splits[name]
        except KeyError:
            raise TaskNotFound(f"unknown split {name!r}", code="invalid_split") from None

    def check_task(self, task: Task) -> None:
        """Raise DataError when ``task`` (a client's ``task_spec``) lacks a field the prompt or
        the grader reads, so that it is refused at ``/create`` rather than failing later."""
        missing = sorted(self.task_fields.difference(task))
        if missing:
            raise DataError(
                f"task_spec lacks the field{'s' if len(missing) > 1 else ''} "
                + ", ".join(repr(m) for m in missing),
                hint="Send a task as /task or /tasks return it",
                code="task_incomplete",
            )

    def public(self, task: Task) -> Task:
        """``task`` as clients see it: without the private fields."""
        if not self.private_fields:
            return task
        return {k: v for k, v in task.items() if k not in self.private_fields}

    def find_task(self, task_id: Any) -> Task | None:
        """The full task with the default id ``task_id`` (``<dataset split>-<row>``) in a split
        that serves its rows in order, else None. A client sending back a task it got from
        ``/task`` is graded against this row, private fields included."""
        if not isinstance(task_id, str) or "-" not in task_id:
            return None
        split, _, row = task_id.rpartition("-")
        if not row.isdigit():
            return None
        i = int(row)
        for view in self.splits.values():
            ours = view.shaper.split == split and view.shaper.id_column is None
            if ours and i < len(view) and view.index[i] == i:  # the view serves its rows in order
                task = view.task(i)
                if task.get("id") == task_id:
                    return task
        return None

    def summary(self) -> str:
        """``train 7,473 / test 1,319``."""
        return " / ".join(f"{v.name} {len(v):,}" for v in self.splits.values())

    # -- an episode ----------------------------------------------------------------------------

    @property
    def blocking(self) -> bool:
        """Whether tool calls may wait on I/O (then they stream with keep-alive pings)."""
        assert self.submit is not None
        return self.submit.blocking

    @property
    def inline_prompt(self) -> bool:
        """Whether the prompt may render on the event loop (see ``Prompter.inline``)."""
        assert self.prompter is not None
        return self.prompter.inline

    def prompt(self, task: Task) -> list[ContentBlock]:
        assert self.prompter is not None
        return self.prompter.prompt(task)

    def messages(self, task: Task) -> list[Message]:
        assert self.prompter is not None
        return self.prompter.messages(task)

    def grade_counts(self) -> dict[str, int]:
        """Answers graded so far, by outcome: ``{"correct": n, "incorrect": n, "ungradeable": n}``."""
        assert self.submit is not None
        return self.submit.counts.as_dict()

    async def aclose(self) -> None:
        """Release what grading holds open (a judge's HTTP connections)."""
        if self.submit is not None:
            await self.submit.grader.aclose()

    async def call_tool(
        self, episode: Episode, name: str, tool_input: dict[str, Any]
    ) -> RunToolSuccess | RunToolError:
        assert self.submit is not None
        return await self.submit.call(episode, name, tool_input)


def load_environment(path: str | os.PathLike[str] | Path) -> Environment:
    """Load the spec at ``path`` and compile it; raises SpecError listing every problem."""
    return Environment(load_spec(path))
