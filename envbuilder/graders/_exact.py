"""The ``exact_match`` grader: extract the answer, normalise both sides, compare to the target(s)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from envbuilder import deadlines
from envbuilder.errors import Loc
from envbuilder.graders import _safe_regex
from envbuilder.graders._base import (
    FieldUse,
    Grade,
    Grader,
    GraderConfig,
    GraderConfigError,
    GraderContext,
    MissingTarget,
    Task,
    grader_template,
    render_target,
    why_target_missing,
)
from envbuilder.graders._normalize import extract_number, hedged_numbers, normalize
from envbuilder.plugins import ConfigModel
from envbuilder.templating import Template

NormalizerName = Literal[
    "strip",
    "lower",
    "whitespace",
    "punctuation",
    "currency",
    "thousands",
    "leading_zeros",
    "number",
    "unicode",
]
FlagName = Literal["ignorecase", "multiline", "dotall", "verbose", "ascii"]


class ExtractSpec(ConfigModel):
    """Pull the answer out of a longer response with a regular expression."""

    pattern: str
    """A regular expression (Python syntax) searched in the response."""
    group: int | str = 0
    """Which group of the match is the answer (number or name; 0 is the whole match)."""
    match: Literal["first", "last"] = "last"
    """Use the first or the last match."""
    flags: list[FlagName] = Field(default_factory=list)
    """Regex flags, e.g. `[ignorecase]`."""
    fallback: Literal["none", "whole", "number"] = "none"
    """With no match: `none` makes the answer ungradeable, `whole` uses the whole response,
    `number` uses the final number in the response."""
    timeout: float = Field(default=_safe_regex.DEFAULT_TIMEOUT, gt=0, le=5)
    """Seconds the search may take before the answer is ungradeable (guards slow patterns)."""

    _check = field_validator("pattern")(_safe_regex.check_pattern)


class ExactMatchConfig(GraderConfig):
    """Compare the (extracted, normalised) answer with one or more targets."""

    type: Literal["exact_match"]
    target: str | list[str]
    """Jinja template(s) over the task giving the correct answer, e.g.
    `{{ answer.split('####')[-1] }}`; with a list, any target counts as correct."""
    extract: Literal["number", "none"] | ExtractSpec = "none"
    """How to find the answer in the response: `number` (the final number, after "the answer
    is", `####` or `\\boxed{}` when present), `none` (the whole response) or a regex."""
    normalize: list[NormalizerName] = Field(default=["strip", "whitespace"])
    """Normalisers applied in order to both the answer and the targets: `strip`, `lower`,
    `whitespace` (collapse runs), `punctuation` (drop all, `.` and `-` included), `currency`
    (drop $€£¥₹), `thousands` (1,000 → 1000), `leading_zeros` (007 → 7), `number` (canonical
    numeric form: 72.0 → 72, 1e3 → 1000), `unicode` (NFKC)."""


class ExactMatchGrader(Grader):
    Config = ExactMatchConfig
    config: ExactMatchConfig
    reads_only_fields = True  # the task through its target templates and named fields only
    task_free = True  # waits only on futures and its own tasks (offloads, verdicts)

    def __init__(self, config: ExactMatchConfig, context: GraderContext):
        super().__init__(config, context)
        targets = [config.target] if isinstance(config.target, str) else config.target
        # A list's templates are at `target[i]`; one template is at `target`.
        self._keys: list[Loc] = (
            [("target",)] if isinstance(config.target, str) else [("target", i) for i in range(len(targets))]
        )
        self._targets = [
            grader_template(t, key=key, context=context, name=f"grader.target[{i}]")
            for i, (t, key) in enumerate(zip(targets, self._keys, strict=True))
        ]
        extract = config.extract
        self._regex = (
            _safe_regex.compile_pattern(extract.pattern, extract.flags)
            if isinstance(extract, ExtractSpec)
            else None
        )
        self._numeric = extract == "number"
        if isinstance(extract, ExtractSpec) and self._regex is not None:
            group = extract.group
            known = group in self._regex.groupindex if isinstance(group, str) else group <= self._regex.groups
            if not known:
                raise GraderConfigError(
                    f"the pattern has no group {group!r}",
                    loc=("extract", "group"),
                    hint=f"It has {self._regex.groups} numbered group(s)"
                    + (f" and named {', '.join(self._regex.groupindex)}" if self._regex.groupindex else ""),
                    code="grader_config",
                )

    def field_uses(self) -> list[FieldUse]:
        return [FieldUse(key, t.variables) for key, t in zip(self._keys, self._targets, strict=True)]

    def target_templates(self) -> list[Template]:
        return list(self._targets)

    def target(self, task: Task) -> str | list[str] | None:
        values = self._target_values(task)
        if not values:
            return None
        return values[0] if len(values) == 1 else values

    def _target_values(self, task: Task) -> list[str]:
        """The task's normalised targets, those that are missing (null, empty) left out."""
        out = []
        for template in self._targets:
            try:
                out.append(self._norm(render_target(template, task)))
            except MissingTarget:
                continue
        return out

    def missing_target(self, task: Task) -> str | None:
        return why_target_missing(self._targets, task)

    def _norm(self, text: str) -> str:
        text = normalize(text, list(self.config.normalize))
        if self._numeric:
            number = extract_number(text)
            return normalize(number, ["number"]) if number is not None else text
        return text

    def extract(self, response: str) -> str | None:
        """The answer found in ``response`` (None when there is none).

        Raises:
            PatternTimeout: the extraction pattern ran out of time on this response.
        """
        if self._numeric:
            return extract_number(response)
        if self._regex is None:
            return response
        spec = self.config.extract
        assert isinstance(spec, ExtractSpec)
        matches = _safe_regex.find_all(self._regex, response, timeout=spec.timeout)
        if spec.match == "last":
            matches.reverse()
        for m in matches[:1]:
            try:
                found = m.group(spec.group)
            except IndexError:
                found = None
            if found is not None:
                return str(found)
        if spec.fallback == "whole":
            return response
        if spec.fallback == "number":
            return extract_number(response)
        return None

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        target_list = self._target_values(task)
        if not target_list:
            return Grade.ungradeable(self.missing_target(task) or "the task has no target", target=None)
        targets = target_list[0] if len(target_list) == 1 else target_list
        try:
            # A spec's extraction pattern runs off the event loop (it may backtrack for its timeout).
            if self._regex is None:
                extracted = self.extract(answer)
            else:
                extracted = await deadlines.offload(self.extract, answer)
        except _safe_regex.PatternTimeout:
            return Grade.ungradeable("the extraction pattern took too long on this answer", target=targets)
        if extracted is None:
            return Grade.ungradeable(
                "no answer could be extracted from the response", extracted=None, target=targets
            )
        hedge = hedged_numbers(answer) if self._numeric else []
        if hedge:
            return Grade.incorrect(
                f"several different final answers ({', '.join(hedge)}): a hedge is not an answer",
                extracted=", ".join(hedge),
                target=targets,
            )
        value = self._norm(extracted)
        if value in target_list:
            return Grade.correct("the answer matches", extracted=value, target=targets)
        return Grade.incorrect("the answer does not match", extracted=value, target=targets)
