"""The ``regex`` grader: the answer is correct when a pattern (built from the task) matches it."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from envbuilder import deadlines
from envbuilder.graders import _safe_regex
from envbuilder.graders._base import (
    FieldUse,
    Grade,
    Grader,
    GraderConfig,
    GraderContext,
    MissingTarget,
    Task,
    grader_template,
    render_target,
    why_target_missing,
)
from envbuilder.graders._exact import FlagName
from envbuilder.isolation import processes
from envbuilder.templating import Template

# `{{ expr }}` in a pattern: the rendered value is inserted escaped, as a literal.
_EXPRESSION = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


class RegexConfig(GraderConfig):
    """Correct when the answer matches a regular expression."""

    type: Literal["regex"]
    pattern: str
    """A regular expression (Python syntax). `{{ expr }}` inserts a task value, escaped so it
    matches literally: `^\\s*{{ answer }}\\s*$`."""
    mode: Literal["search", "fullmatch"] = "search"
    """`search` anywhere in the answer, or `fullmatch` the whole answer."""
    flags: list[FlagName] = Field(default_factory=list)
    """Regex flags, e.g. `[ignorecase, multiline]`."""
    max_answer_chars: int = Field(default=20_000, ge=1)
    """Longer answers are ungradeable rather than searched."""
    timeout: float = Field(default=_safe_regex.DEFAULT_TIMEOUT, gt=0, le=5)
    """Seconds one match may take before the answer is ungradeable (guards slow patterns)."""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        # Check the literal parts with a placeholder where each value will go.
        _safe_regex.check_pattern(_EXPRESSION.sub("x", value))
        return value


class RegexGrader(Grader):
    Config = RegexConfig
    config: RegexConfig
    reads_only_fields = True  # the task through its target templates and named fields only
    task_free = True  # waits only on futures and its own tasks (offloads, verdicts)

    def __init__(self, config: RegexConfig, context: GraderContext):
        super().__init__(config, context)
        parts = _EXPRESSION.split(config.pattern)
        # split() alternates literal text and expression sources.
        self._literals = parts[0::2]
        self._values = [
            grader_template("{{" + src + "}}", key=("pattern",), context=context, name=f"grader.pattern[{i}]")
            for i, src in enumerate(parts[1::2])
        ]
        self._static = None if self._values else _safe_regex.compile_pattern(config.pattern, config.flags)

    def field_uses(self) -> list[FieldUse]:
        return [FieldUse(("pattern",), frozenset().union(*(t.variables for t in self._values)))]

    def missing_target(self, task: Task) -> str | None:
        return why_target_missing(self._values, task)

    def pattern(self, task: Task) -> str:
        """The pattern for ``task``, task values escaped.

        Raises:
            MissingTarget: a value it reads is null or renders empty.
        """
        out = [self._literals[0]]
        for value, literal in zip(self._values, self._literals[1:], strict=True):
            out.append(_safe_regex.regex.escape(render_target(value, task)))
            out.append(literal)
        return "".join(out)

    def target_templates(self) -> list[Template]:
        return list(self._values)

    def target(self, task: Task) -> str | None:
        try:
            return self.pattern(task)
        except MissingTarget:
            return None

    def gold(self, task: Task) -> str | None:
        return None  # the target is a pattern: the answers it matches cannot be told in general

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        cfg = self.config
        too_long = Grade.too_long(answer, cfg.max_answer_chars, "match")
        if too_long is not None:
            return too_long
        try:
            source = self.pattern(task)
        except MissingTarget as exc:
            return Grade.ungradeable(exc.reason)
        try:
            compiled = self._static or _safe_regex.compile_pattern(source, cfg.flags)
        except ValueError as exc:
            return Grade.ungradeable(f"the pattern built for this task is invalid: {exc}", pattern=source)
        match = _safe_regex.search if cfg.mode == "search" else _safe_regex.fullmatch
        slow = Grade.ungradeable("matching the pattern took too long on this answer", pattern=source)
        try:
            # Ordinary matches take microseconds: in a thread, under the engine's own timeout.
            found = await deadlines.offload(
                match, compiled, answer, min(cfg.timeout, _safe_regex.DEFAULT_TIMEOUT)
            )
            matched = None if found is None else found.group(0)
        except _safe_regex.PatternTimeout:
            if cfg.timeout <= _safe_regex.DEFAULT_TIMEOUT:
                return slow
            try:  # a slow one: in a grading process, killed at the budget
                matched = await processes.run_checked(
                    _safe_regex.first_match,
                    compiled.pattern,
                    compiled.flags,
                    answer,
                    cfg.mode == "fullmatch",
                    timeout=cfg.timeout,
                )
            except (processes.CheckTimeout, processes.WorkerFailed):
                return slow
        if matched is None:
            return Grade.incorrect("the answer does not match the pattern", pattern=source)
        return Grade.correct("the answer matches the pattern", pattern=source, matched=matched)
