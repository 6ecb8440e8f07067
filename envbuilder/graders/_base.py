"""What every grader provides, the three outcomes of a grade, and the grader registry."""

from __future__ import annotations

import abc
import contextvars
import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from envbuilder import deadlines
from envbuilder.data import Task
from envbuilder.errors import EnvbuilderError, GraderError, Loc, TemplateError
from envbuilder.graders._trajectory import TRAJECTORY
from envbuilder.plugins import Plugin, Registry
from envbuilder.spec import GraderConfig
from envbuilder.spec import graders as _graders
from envbuilder.templating import Template


class Outcome(enum.StrEnum):
    CORRECT = "correct"
    """Correct, or scored (``score`` holds the fraction of full credit)."""
    INCORRECT = "incorrect"
    UNGRADEABLE = "ungradeable"
    """Nothing could be judged (no answer extractable, judge unreachable, …): never a silent 0."""


@dataclass(frozen=True)
class Grade:
    """The result of grading one answer."""

    outcome: Outcome
    score: float | None
    """Fraction of full credit in [0, 1]; None when ungradeable."""
    reason: str = ""
    """One line saying what happened (shown to the agent unless it reveals the answer)."""
    details: dict[str, Any] = field(default_factory=dict)
    """Extracted answer, target, per-grader scores, judge verdict…: goes into tool metadata."""
    void: bool = False
    """Ungradeable for a reason outside the agent's answer (a judge that is down, a sandbox that
    cannot start, a checker's process that died): the episode it ends is *void*, reward null
    whatever ``submit.on_ungradeable`` says, never 0 (docs/explanation/rewards.md)."""

    @classmethod
    def correct(cls, reason: str = "", **details: Any) -> Grade:
        return cls(Outcome.CORRECT, 1.0, reason, details)

    @classmethod
    def incorrect(cls, reason: str = "", **details: Any) -> Grade:
        return cls(Outcome.INCORRECT, 0.0, reason, details)

    @classmethod
    def ungradeable(cls, reason: str, **details: Any) -> Grade:
        return cls(Outcome.UNGRADEABLE, None, reason, details)

    @classmethod
    def failed(cls, reason: str, **details: Any) -> Grade:
        """Ungradeable because the environment failed, not the answer: a void grade."""
        return cls(Outcome.UNGRADEABLE, None, reason, details, void=True)

    @classmethod
    def too_long(cls, answer: str, limit: int, action: str, **details: Any) -> Grade | None:
        """Ungradeable when ``answer`` exceeds ``limit`` characters (else None): graders bound
        the work an agent's answer can cost them."""
        if len(answer) <= limit:
            return None
        return cls.ungradeable(
            f"the answer is too long to {action} ({len(answer):,} characters; at most {limit:,})", **details
        )


class MissingTarget(GraderError):
    """A task has no target to grade against: a field the target reads is null, or the
    target renders empty. Its answers are ungradeable, never compared with ``"None"``."""

    def __init__(self, reason: str):
        super().__init__(reason, code="missing_target")
        self.reason = reason


def render_target(template: Template, task: Task, *, allow_empty: bool = False) -> str:
    """``template`` rendered over ``task``, the one rule every grader's target follows
    (``allow_empty``: an empty rendering is fine, as a judge's optional reference is).

    Raises:
        MissingTarget: the rendering is empty, or shows ``None`` from a null field.
    """
    done = _rendered.get()
    text = done.get((id(template), id(task))) if done is not None else None
    if isinstance(text, TemplateError):
        raise text
    if text is None:
        text = template.render(task)
    nulls = sorted(name for name in template.variables if name in task and task[name] is None)
    if nulls and "None" in text:
        fields = ", ".join(f"`{n}`" for n in nulls)
        raise MissingTarget(f"the task has no target: its field {fields} is null")
    if not text.strip() and not allow_empty:
        raise MissingTarget(f"the task has no target: {template.name} renders empty")
    return text


_rendered: contextvars.ContextVar[dict[tuple[int, int], str | TemplateError] | None] = contextvars.ContextVar(
    "envbuilder_rendered_targets", default=None
)


async def grade_off_loop(grader: Grader, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
    """``grader.grade``, with the target templates that do more than show fields (they render in
    a render process, for up to their budget) rendered over ``task`` on a worker thread first,
    so the grade itself never waits for a render on the event loop."""
    slow = grader.slow_targets()
    if not slow:
        return await grader.grade(answer, task, secrets)
    token = _rendered.set(await deadlines.offload(_render_each, slow, task))
    try:
        return await grader.grade(answer, task, secrets)
    finally:
        _rendered.reset(token)


def _render_each(templates: list[Template], task: Task) -> dict[tuple[int, int], str | TemplateError]:
    out: dict[tuple[int, int], str | TemplateError] = {}
    for template in templates:
        try:
            out[id(template), id(task)] = template.render(task)
        except TemplateError as exc:
            out[id(template), id(task)] = exc
    return out


def why_target_missing(templates: list[Template], task: Task, *, allow_empty: bool = False) -> str | None:
    """The reason none of ``templates`` gives ``task`` a target (None when one does)."""
    reason = None
    for template in templates:
        try:
            render_target(template, task, allow_empty=allow_empty)
        except MissingTarget as exc:
            reason = reason or exc.reason
        else:
            return None
    return reason


@dataclass(frozen=True)
class FieldUse:
    """The task fields one key of a grader's block reads: where a field the tasks lack is reported."""

    at: Loc
    """The key inside the grader's block: ``("target",)``, ``("graders", 1, "pattern")``."""
    fields: frozenset[str]
    named: bool = False
    """True when the key's value is a field's name (``choices_field: options``), False when it
    is a template that reads the fields."""

    def under(self, key: Loc) -> FieldUse:
        """This use, seen from the block that holds this grader's block at ``key``."""
        return FieldUse((*key, *self.at), self.fields, self.named)


def field_uses_of(grader: Grader) -> list[FieldUse]:
    """``grader``'s :meth:`~Grader.field_uses`, and the rest of its :attr:`~Grader.fields` (a
    plugin that names only those) located at its block."""
    uses = [use for use in grader.field_uses() if use.fields]
    rest = grader.fields - frozenset().union(*(use.fields for use in uses))
    return [*uses, FieldUse((), rest)] if rest else uses


def nested(key: Loc, exc: EnvbuilderError) -> GraderConfigError:
    """``exc`` (with the errors it carries) raised by a grader built at ``key`` inside another
    grader's block, located from that block."""
    errors = exc.errors if isinstance(exc, GraderConfigError) else [exc]
    moved = [GraderConfigError(e.message, loc=(*key, *e.loc), hint=e.hint, code=e.code) for e in errors]
    uses = exc.field_uses if isinstance(exc, GraderConfigError) else []
    return GraderConfigError.of(moved, [use.under(key) for use in uses])


def grader_template(
    source: str, *, key: Loc, context: GraderContext, name: str | None = None, from_file: bool = False
) -> Template:
    """The template at ``key`` of a grader's block; one that does not compile is a
    GraderConfigError located at ``key`` (``name``, the template's name in render errors,
    defaults to ``grader.<key>``)."""
    name = name or "grader." + ".".join(map(str, key))
    try:
        return Template(source, name=name, base_dir=context.base_dir, from_file=from_file)
    except TemplateError as exc:
        message = exc.message.removeprefix(f"{name}: ")
        raise GraderConfigError(message, loc=key, hint=exc.hint, code=exc.code) from None


@dataclass(frozen=True)
class GraderContext:
    """What a grader may need besides its config."""

    base_dir: Path | None = None
    """The spec's folder, for relative template files."""


class Grader(Plugin, abc.ABC):
    """A grader; registered in ``envbuilder.graders`` under its ``Config.type``."""

    Config: ClassVar[type[GraderConfig]]
    blocking: bool = False
    """True when grading waits on I/O or long work (an HTTP judge, a symbolic check): such
    calls stream with keep-alives. A class default; composite graders set it per instance."""
    compares_target: bool = True
    """True when a grade compares the answer with :meth:`target` (so the target submitted as a
    gold answer can only meet itself: a circular check); False when the target is a reference
    solution the grade never reads (``unit_tests`` runs the answer against the task's tests)."""
    needs_state: ClassVar[bool] = False
    """The grader compares the episode's state document: the spec must declare `state:`."""
    evaluates_answers: ClassVar[bool] = False
    """The grader's checker runs the answer as code (reasoning-gym families whose checker is
    ``eval``): it runs confined (``processes.run_confined``), and serving it needs a working
    sandbox or the operator's ``--allow-unconfined-checkers``."""

    task_free: bool = False
    """True when :meth:`grade` never asks for the running asyncio task (``asyncio.timeout``,
    anyio's cancel scopes, ``current_task()``) before it first waits: the in-process driver may
    then start a synchronous caller's answer without a task
    (:func:`envbuilder.threadloop.run_sync`). False by default, so a plugin that says nothing
    always runs in a task. A class default; composite graders set it per instance."""

    reads_only_fields: ClassVar[bool] = False
    """True when the grader reads its task context only through the fields its templates and
    config name (:attr:`fields`): it then reads the episode's trajectory only when one of them
    is ``trajectory``. False (the default, so a plugin that says nothing gets what it always
    got): the grader may read anything in the context."""

    def __init__(self, config: Any, context: GraderContext):
        self.config = config
        self.context = context

    @property
    def reads_trajectory(self) -> bool:
        """Whether grading may read the episode's :class:`Trajectory` (the context's
        ``trajectory``): the episode builds one only for a grader that may."""
        return not self.reads_only_fields or TRAJECTORY in self.fields

    @property
    def fields(self) -> frozenset[str]:
        """The task fields this grader reads (checked against the data at load time): by
        default those of :meth:`field_uses`."""
        return frozenset().union(*(use.fields for use in self.field_uses()))

    def field_uses(self) -> list[FieldUse]:
        """The task fields this grader reads, by the key of its block that reads them (a
        missing field is reported at that key). A plugin may give only :attr:`fields`
        instead: those are reported at its block."""
        return []

    @abc.abstractmethod
    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        """Grade ``answer`` to ``task``. Must not raise for bad answers: return a Grade."""

    def walk(self) -> list[Grader]:
        """This grader and the graders inside it (a composite's children, theirs, …)."""
        out: list[Grader] = [self]
        for child in getattr(self, "children", ()):
            out.extend(child.walk())
        return out

    def target_templates(self) -> list[Template]:
        """The templates this grader renders over the task alone with :func:`render_target`."""
        return []

    def slow_targets(self) -> list[Template]:
        """The target templates of this grader and those inside it that do more than show
        fields (:func:`grade_off_loop` renders them off the event loop)."""
        slow: list[Template] | None = self.__dict__.get("_slow_targets")
        if slow is None:  # the graders and templates are fixed once built: asked once per episode
            slow = self.__dict__["_slow_targets"] = [
                t for g in self.walk() for t in g.target_templates() if not t.bounded
            ]
        return slow

    def target(self, task: Task) -> Any:
        """What ``task`` is graded against, for previews (None if unknown): an answer, or what
        stands for one (a pattern); see :meth:`gold` for an answer to submit."""
        return None

    def gold(self, task: Task) -> str | None:
        """An answer an agent could submit to ``task`` that earns full reward (what
        ``envbuilder check`` submits when the spec has no ``gold:``), or None when the grader
        cannot know one. By default its :meth:`target` (the first of several); a grader whose
        target is not an answer (a ``regex`` pattern) says None."""
        target = self.target(task)
        if isinstance(target, list | tuple):
            target = target[0] if target else None
        return None if target is None else str(target)

    def missing_target(self, task: Task) -> str | None:
        """Why ``task`` has no target to grade against (a null field, an empty rendering), or
        None when it has one or the grader needs none. Such a task's answers are ungradeable."""
        return None

    async def aclose(self) -> None:
        """Release what the grader holds open (HTTP connections); it may be used again after."""


class GraderConfigError(GraderError):
    """A grader cannot be built from its config; ``loc`` is the key path inside the grader block.

    A composite grader reports every child's problem at once: :attr:`errors` holds them all
    (this one first), and :attr:`field_uses` the fields its children that were built read, so
    those are still checked against the data.
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        code: str | None = None,
        loc: tuple[str | int, ...] = (),
    ):
        super().__init__(message, hint=hint, code=code, loc=loc)
        self.errors: list[EnvbuilderError] = [self]
        self.field_uses: list[FieldUse] = []

    @classmethod
    def of(cls, errors: list[GraderConfigError], field_uses: list[FieldUse]) -> GraderConfigError:
        """One error carrying ``errors`` (at least one) and the ``field_uses`` built beside them."""
        first = errors[0]
        out = cls(first.message, hint=first.hint, code=first.code, loc=first.loc)
        out.errors = [out, *errors[1:]]
        out.field_uses = field_uses
        return out


def build_grader(config: GraderConfig, context: GraderContext) -> Grader:
    """The grader of ``config`` (its ``type:`` picks the class)."""
    return graders.for_config(config)(config, context)


graders: Registry[type[Grader]] = _graders
