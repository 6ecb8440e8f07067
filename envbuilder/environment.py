"""A compiled spec: its splits and tasks, prompt and messages, tools, and episode logic."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError, create_model
from pydantic import Field as PydanticField

from envbuilder.data import Source, SplitView, Task, TaskShaper, sources
from envbuilder.errors import (
    DataError,
    EnvbuilderError,
    Problem,
    SpecError,
    TaskNotFound,
    TemplateError,
)
from envbuilder.graders import Grade, Grader, GraderContext, Outcome, graders
from envbuilder.protocol import (
    MESSAGE_BLOCK_TYPES,
    ContentBlock,
    ListToolsOutput,
    Message,
    RunToolError,
    RunToolSuccess,
    Split,
    TextBlock,
    ToolOutput,
    ToolSpec,
)
from envbuilder.spec import LoadedSpec, load_spec
from envbuilder.templating import Template

__all__ = ["Environment", "Episode", "load_environment"]


@dataclass
class Episode:
    """The per-session state of an episode: small and serialisable (see :meth:`to_dict`)."""

    task: Task
    attempts: int = 0
    finished: bool = False
    secrets: dict[str, str] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        return cls(**data)


class Environment:
    """Everything a server needs to serve one spec."""

    def __init__(self, loaded: LoadedSpec):
        self.loaded = loaded
        spec = self.spec = loaded.spec
        self.name = spec.name
        problems: list[Problem] = []

        def fail(loc: tuple[str | int, ...], exc: EnvbuilderError, value: Any = None) -> None:
            problems.append(
                loaded.locate(
                    loc,
                    exc.message,
                    code=exc.code,
                    hint=exc.hint,
                    value=value,
                    has_value=value is not None,
                )
            )

        self.source: Source = sources.for_config(spec.dataset)(spec.dataset, loaded.base_dir)
        source_splits = self.source.split_names()
        self.splits: dict[str, SplitView] = {}
        for name, split in spec.splits.items():
            source_split = split.source or name
            if source_split not in source_splits:
                fail(
                    ("splits", name, "source") if split.source else ("splits", name),
                    DataError(
                        f"the dataset has no split {source_split!r}",
                        hint=f"Its splits are: {', '.join(source_splits)}",
                    ),
                )
                continue
            try:
                table = self.source.open(source_split)
            except DataError as exc:
                fail(("dataset",), exc)
                continue
            shape = spec.task
            missing = [
                c
                for c in [
                    *(shape.include or []),
                    *shape.exclude,
                    *shape.rename,
                    *([shape.id] if shape.id else []),
                ]
                if c not in table.columns
            ]
            if missing:
                fail(
                    ("task",),
                    DataError(
                        f"split {name!r} has no column {missing[0]!r}",
                        hint=f"Its columns are: {', '.join(table.columns)}",
                    ),
                )
                continue
            shaper = TaskShaper(
                name,
                id_column=shape.id,
                include=shape.include,
                exclude=shape.exclude,
                rename=shape.rename,
                columns=table.columns,
            )
            self.splits[name] = SplitView(name, split.type, table, shaper)

        self.prompt_template: Template | None = None
        self.system_template: Template | None = None
        try:
            p = spec.prompt
            if p.template_file is not None:
                self.prompt_template = Template(
                    p.template_file,
                    name="prompt.template_file",
                    base_dir=loaded.base_dir,
                    from_file=True,
                )
            else:
                assert p.template is not None
                self.prompt_template = Template(p.template, name="prompt.template", base_dir=loaded.base_dir)
            if p.system is not None:
                self.system_template = Template(p.system, name="prompt.system", base_dir=loaded.base_dir)
        except EnvbuilderError as exc:
            fail(("prompt",), exc)

        self.grader: Grader | None = None
        try:
            self.grader = graders.for_config(spec.grader)(
                spec.grader, GraderContext(base_dir=loaded.base_dir)
            )
        except EnvbuilderError as exc:
            fail(("grader",), exc)

        fields = {f for view in self.splits.values() for f in view.shaper.fields}
        if self.splits:
            for loc, names in [
                (("prompt",), self.prompt_template.variables if self.prompt_template else ()),
                (
                    ("prompt", "system"),
                    self.system_template.variables if self.system_template else (),
                ),
                (("grader",), self.grader.fields if self.grader else ()),
            ]:
                for var in sorted(set(names) - fields - _JINJA_GLOBALS):
                    fail(
                        loc,
                        TemplateError(
                            f"the template uses {var!r}, which the tasks lack",
                            hint=f"Task fields: {', '.join(sorted(fields))}",
                        ),
                    )
        if problems:
            raise SpecError(problems)

        submit = spec.submit
        self.submit = submit
        self._input_model: type[BaseModel] = create_model(  # type: ignore[call-overload]
            f"{_camel(submit.name)}Input",
            **{submit.answer_field: (str, PydanticField(description=submit.answer_description))},
        )
        self.tool_specs = [
            ToolSpec(
                name=submit.name,
                description=submit.description,
                input_schema=self._input_model.model_json_schema(),
            )
        ]
        self.tools_listing = ListToolsOutput(
            tools=self.tool_specs,
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

    def summary(self) -> str:
        """``train 7,473 / test 1,319``."""
        return " / ".join(f"{v.name} {len(v):,}" for v in self.splits.values())

    # -- an episode ----------------------------------------------------------------------------

    @property
    def blocking(self) -> bool:
        """Whether tool calls may wait on I/O (then they stream with keep-alive pings)."""
        return bool(self.grader and self.grader.blocking)

    def prompt(self, task: Task) -> list[ContentBlock]:
        assert self.prompt_template is not None
        return [TextBlock(text=self.prompt_template.render(task))]

    def messages(self, task: Task) -> list[Message]:
        out: list[Message] = []
        if self.system_template is not None:
            out.append(Message(role="system", blocks=[TextBlock(text=self.system_template.render(task))]))
        out.append(Message(role="user", blocks=list(self.prompt(task))))
        return out

    async def call_tool(
        self, episode: Episode, name: str, tool_input: dict[str, Any]
    ) -> RunToolSuccess | RunToolError:
        """Run tool ``name``; tool-level failures are ``RunToolError``s, never exceptions."""
        submit = self.submit
        if name != submit.name:
            return RunToolError(error=f"{name!r} is not a valid tool", reason="not_found")
        if episode.finished:
            return RunToolError(
                error=f"{name!r} was not run: the episode has finished (a tool returned "
                "finished=True), so no further tool calls are accepted.",
                reason="episode_finished",
            )
        try:
            args = self._input_model.model_validate(tool_input)
        except ValidationError as exc:
            return RunToolError(
                error=f"Tool input validation error: {exc.errors()}", reason="input_validation"
            )
        answer: str = getattr(args, submit.answer_field)
        episode.attempts += 1
        assert self.grader is not None
        try:
            grade = await self.grader.grade(answer, episode.task, episode.secrets)
        except Exception as exc:  # a grader bug must not crash the server, nor score 0
            grade = Grade.ungradeable(f"the grader failed: {type(exc).__name__}")
        return RunToolSuccess(output=self._output(episode, grade))

    def _output(self, episode: Episode, grade: Grade) -> ToolOutput:
        submit = self.submit
        left = submit.max_attempts - episode.attempts
        full = grade.outcome is Outcome.CORRECT and (grade.score or 0.0) >= 1.0
        episode.finished = finished = full or left <= 0
        reward: float | None
        if grade.outcome is Outcome.UNGRADEABLE:
            reward = None
            text = f"Your answer could not be graded: {grade.reason}."
        else:
            score = grade.score or 0.0
            reward = submit.reward_incorrect + score * (submit.reward_correct - submit.reward_incorrect)
            text = (
                "Correct!"
                if full
                else ("Incorrect." if score <= 0 else f"Partially correct (score {score:.2f}).")
            )
        if not finished:
            text += f" You have {left} attempt{'s' if left != 1 else ''} left."
        elif not full and submit.reveal_answer and self.grader is not None:
            target = self.grader.target(episode.task)
            if target is not None:
                text += f" The correct answer is {target}."
        metadata = {
            "outcome": grade.outcome.value,
            "score": grade.score,
            "reason": grade.reason,
            "attempt": episode.attempts,
            "max_attempts": submit.max_attempts,
            **grade.details,
        }
        return ToolOutput(blocks=[TextBlock(text=text)], metadata=metadata, reward=reward, finished=finished)


_JINJA_GLOBALS = frozenset({"letters", "range", "dict", "lipsum", "cycler", "joiner", "namespace", "loop"})


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").split("_"))


def load_environment(path: str | os.PathLike[str] | Path) -> Environment:
    """Load the spec at ``path`` and compile it; raises SpecError listing every problem."""
    return Environment(load_spec(path))
