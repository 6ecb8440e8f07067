"""Graders made of graders: ``weighted_mean``, ``all``, ``any`` and ``cascade``.

Each is a registered grader type whose config holds nested grader configs, so they nest
freely in YAML. Their configs build lazily (``defer_build``): their field refers back to the
registry that is still loading them.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from envbuilder.errors import EnvbuilderError
from envbuilder.graders._base import (
    FieldUse,
    Grade,
    Grader,
    GraderConfig,
    GraderConfigError,
    GraderContext,
    Outcome,
    Task,
    build_grader,
    field_uses_of,
    graders,
    nested,
)
from envbuilder.plugins import PluginField

NestedGrader = Annotated[GraderConfig, PluginField(graders)]


class _CompositeConfig(GraderConfig):
    model_config = ConfigDict(defer_build=True)

    graders: list[NestedGrader] = Field(min_length=1)
    """The graders to combine; each is a grader block with its own `type:`."""


class WeightedMeanConfig(_CompositeConfig):
    """The weighted mean of several graders' scores (ungradeable if any is)."""

    type: Literal["weighted_mean"]
    weights: list[float] | None = None
    """One non-negative weight per grader (default: equal weights)."""

    @model_validator(mode="after")
    def _weights_fit(self) -> WeightedMeanConfig:
        if self.weights is not None:
            if len(self.weights) != len(self.graders):
                raise ValueError(f"give one weight per grader ({len(self.graders)}), not {len(self.weights)}")
            if any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
                raise ValueError("weights must be non-negative and not all zero")
        return self


class AllConfig(_CompositeConfig):
    """Correct only when every grader says correct (the score is the lowest score)."""

    type: Literal["all"]


class AnyConfig(_CompositeConfig):
    """Correct when any grader says correct (the score is the highest score)."""

    type: Literal["any"]


class CascadeConfig(_CompositeConfig):
    """Graders tried in order, cheapest first: the first one whose outcome is in `decisive`
    decides; later ones (an LLM judge, say) run only when the earlier ones did not decide."""

    type: Literal["cascade"]
    decisive: list[Literal["correct", "incorrect", "ungradeable"]] = Field(default=["correct"], min_length=1)
    """Outcomes of a grader before the last that end the cascade. The default `[correct]`
    asks the next grader whenever a rule says incorrect or cannot tell."""


def _summary(config: GraderConfig, grade: Grade) -> dict[str, Any]:
    return {
        "type": config.type,
        "outcome": grade.outcome.value,
        "score": grade.score,
        "reason": grade.reason,
        **grade.details,
    }


class _Composite(Grader):
    config: _CompositeConfig

    def __init__(self, config: _CompositeConfig, context: GraderContext):
        super().__init__(config, context)
        self.children: list[Grader] = []
        errors: list[GraderConfigError] = []
        uses: list[FieldUse] = []  # of the children built, for the caller to check all the same
        for i, child in enumerate(config.graders):
            try:
                self.children.append(build_grader(child, context))
            except EnvbuilderError as exc:
                failed = nested(("graders", i), exc)
                errors += failed.errors  # type: ignore[arg-type]  # (all GraderConfigErrors)
                uses += failed.field_uses
            else:
                uses += [use.under(("graders", i)) for use in field_uses_of(self.children[-1])]
        if errors:  # every child's problems at once, not only the first's
            raise GraderConfigError.of(errors, uses)
        self.blocking = any(c.blocking for c in self.children)
        self.task_free = all(c.task_free for c in self.children)  # (some are awaited in turn)
        self.compares_target = any(c.compares_target for c in self.children)

    def field_uses(self) -> list[FieldUse]:
        return [u.under(("graders", i)) for i, c in enumerate(self.children) for u in field_uses_of(c)]

    @property
    def reads_trajectory(self) -> bool:
        return any(c.reads_trajectory for c in self.children)

    def target(self, task: Task) -> Any:
        for child in self.children:
            target = child.target(task)
            if target is not None:
                return target
        return None

    def gold(self, task: Task) -> str | None:
        # The first child's that knows one: a candidate the check grades with every child.
        return next((g for child in self.children if (g := child.gold(task)) is not None), None)

    async def aclose(self) -> None:
        for child in self.children:
            await child.aclose()

    async def _grade_all(self, answer: str, task: Task, secrets: dict[str, str]) -> list[Grade]:
        return list(await asyncio.gather(*(c.grade(answer, task, secrets) for c in self.children)))

    def _details(self, grades: list[Grade]) -> dict[str, Any]:
        return {"graders": [_summary(c.config, g) for c, g in zip(self.children, grades, strict=False)]}


def _stuck(stuck: list[Grade], details: dict[str, Any]) -> Grade:
    """Ungradeable as the first child that could not tell; void when any child failed for a reason
    outside the answer (a judge that is down leaves the whole grade void, never 0)."""
    failed = [g for g in stuck if g.void]
    first = (failed or stuck)[0]
    return Grade(Outcome.UNGRADEABLE, None, first.reason, details, void=bool(failed))


def _scored(score: float, reason: str, **details: Any) -> Grade:
    return Grade(Outcome.CORRECT if score > 0 else Outcome.INCORRECT, score, reason, details)


class WeightedMeanGrader(_Composite):
    Config = WeightedMeanConfig
    config: WeightedMeanConfig

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        grades = await self._grade_all(answer, task, secrets)
        details = self._details(grades)
        stuck = [g for g in grades if g.outcome is Outcome.UNGRADEABLE]
        if stuck:
            return _stuck(stuck, details)
        weights = self.config.weights or [1.0] * len(grades)
        score = sum(w * (g.score or 0.0) for w, g in zip(weights, grades, strict=True)) / sum(weights)
        return _scored(score, f"weighted mean score {score:.2f}", **details)


class AllGrader(_Composite):
    Config = AllConfig
    config: AllConfig

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        grades = await self._grade_all(answer, task, secrets)
        details = self._details(grades)
        wrong = [g for g in grades if g.outcome is Outcome.INCORRECT]
        if wrong:  # one sure "no" decides, even if another grader could not tell
            return Grade.incorrect(wrong[0].reason, **details)
        stuck = [g for g in grades if g.outcome is Outcome.UNGRADEABLE]
        if stuck:
            return _stuck(stuck, details)
        return _scored(min(g.score or 0.0 for g in grades), "every grader agrees", **details)


class AnyGrader(_Composite):
    Config = AnyConfig
    config: AnyConfig

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        grades = await self._grade_all(answer, task, secrets)
        details = self._details(grades)
        scored = [g for g in grades if g.outcome is Outcome.CORRECT]
        if scored:
            best = max(scored, key=lambda g: g.score or 0.0)
            return _scored(best.score or 0.0, best.reason, **details)
        stuck = [g for g in grades if g.outcome is Outcome.UNGRADEABLE]
        if stuck:  # no grader said yes, and one could not tell: not a sure "no"
            return _stuck(stuck, details)
        return Grade.incorrect(grades[0].reason, **details)


class CascadeGrader(_Composite):
    Config = CascadeConfig
    config: CascadeConfig

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        decisive = set(self.config.decisive)
        grades: list[Grade] = []
        for i, child in enumerate(self.children):
            grade = await child.grade(answer, task, secrets)
            grades.append(grade)
            if grade.outcome.value in decisive or i == len(self.children) - 1:
                break
        details = {**self._details(grades), "decided_by": len(grades) - 1}
        return Grade(grade.outcome, grade.score, grade.reason, details, void=grade.void)
