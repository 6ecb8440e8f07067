"""A compiled spec: its splits and tasks, its prompt, its tools and grading, ready to serve."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from envbuilder.data import SplitView, Task
from envbuilder.data._build import open_splits
from envbuilder.episode import Episode, SubmitTool
from envbuilder.errors import (
    DataError,
    EnvbuilderError,
    Loc,
    Problem,
    SpecError,
    TaskNotFound,
    TemplateError,
    name_hint,
)
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
from envbuilder.templating import recording_files, template_globals

__all__ = ["Environment", "Episode", "load_environment"]


def _files(loaded: LoadedSpec, data: list[Path], templates: dict[str, Path]) -> dict[str, Path]:
    """Name every file read; a template found outside the spec's folder (one shipped with
    envbuilder) keeps the name the spec gave it, so a pack that puts it there serves that file."""
    base = loaded.base_dir.resolve()

    def name(path: Path) -> str:
        return Path(os.path.relpath(path, base)).as_posix()

    out = {name(path): path for path in [*loaded.files, *(p.resolve() for p in data)]}
    for given, path in templates.items():
        out[name(path) if path.is_relative_to(base) else Path(given).as_posix()] = path
    return dict(sorted(out.items()))


class Environment:
    """Everything a server needs to serve one spec; raises SpecError listing every problem."""

    def __init__(self, loaded: LoadedSpec, *, strict: bool = True):
        """Compile ``loaded``; with ``strict=False`` (for ``validate``) problems are kept in
        :attr:`problems` instead of raised, and the environment is only good for more checks."""
        self.loaded = loaded
        spec = self.spec = loaded.spec
        self.name = spec.name
        problems: list[Problem] = []

        def fail(loc: Loc, exc: EnvbuilderError) -> None:
            problems.append(loaded.locate(loc, exc.message, code=exc.code, hint=exc.hint))

        self.source, self.splits, errors = open_splits(spec, loaded.base_dir)
        for loc, exc in errors:
            fail(loc, exc)

        self.prompter: Prompter | None = None
        self.submit: SubmitTool | None = None
        with recording_files() as templates:
            try:
                self.prompter = Prompter(spec.prompt, loaded.base_dir, splits=self.splits)
            except EnvbuilderError as exc:
                fail(("prompt",), exc)
            if self.prompter is not None:
                for loc, problem in self.prompter.check():
                    fail(loc, problem)
            try:
                context = GraderContext(base_dir=loaded.base_dir)
                self.submit = SubmitTool(spec.submit, graders.for_config(spec.grader)(spec.grader, context))
            except EnvbuilderError as exc:
                # A nested grader's error says where inside the block it is (`graders[1].type`).
                fail(("grader", *getattr(exc, "loc", ())), exc)

        used = dict(self.prompter.variables()) if self.prompter else {}
        if self.submit is not None:
            used[("grader",)] = self.submit.grader.fields
        self.task_fields: frozenset[str] = (
            (self.prompter.task_fields() if self.prompter else frozenset())
            | (self.submit.grader.fields if self.submit else frozenset())
        ) - template_globals()
        """The task fields the prompt and the grader read: a client's `task_spec` must have them."""
        if self.splits:
            fields = {f for view in self.splits.values() for f in view.shaper.fields}
            if any(p.loc[:1] == ("task",) for p in problems):
                fields |= set(spec.task.rename.values())  # a misnamed column: reported once, above
            for loc, names in used.items():
                for var in sorted(set(names) - fields - template_globals()):
                    fail(
                        loc,
                        TemplateError(
                            f"the template uses {var!r}, which the tasks lack",
                            hint=name_hint(var, sorted(fields), "Task fields"),
                        ),
                    )
        self.problems = problems
        if problems:
            if strict:
                raise SpecError(problems)
            return
        assert self.prompter is not None and self.submit is not None
        self.files: dict[str, Path] = _files(loaded, self.source.files(), templates)
        """Every file the environment was made of, by its path relative to the spec's folder
        (POSIX, may start with ``../``): the spec and its bases, the data files, and the template
        files of the prompt and the graders. Packs, content hashes and catalogs use this list."""
        self.tools_listing = ListToolsOutput(
            tools=[self.submit.tool_spec],
            terminal_tool=None,
            supports_score_group=False,
            message_block_types=MESSAGE_BLOCK_TYPES,
        )

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

    def summary(self) -> str:
        """``train 7,473 / test 1,319``."""
        return " / ".join(f"{v.name} {len(v):,}" for v in self.splits.values())

    # -- an episode ----------------------------------------------------------------------------

    @property
    def blocking(self) -> bool:
        """Whether tool calls may wait on I/O (then they stream with keep-alive pings)."""
        assert self.submit is not None
        return self.submit.blocking

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
