"""The ``exact_match`` grader: extract the answer, normalise both sides, compare to the target(s)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from envbuilder.graders._base import Grade, Grader, GraderConfig, GraderContext, Task
from envbuilder.graders._normalize import extract_number, normalize
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


class ExtractSpec(ConfigModel):
    """Pull the answer out of a longer response with a regular expression."""

    pattern: str
    """A Python regular expression searched in the response."""
    group: int | str = 0
    """Which group of the match is the answer (number or name; 0 is the whole match)."""
    match: Literal["first", "last"] = "last"
    """Use the first or the last match."""
    fallback: Literal["none", "whole"] = "none"
    """With no match: `none` makes the answer ungradeable, `whole` uses the whole response."""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from None
        return value


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
    """Normalisers applied in order to both the answer and the targets."""


class ExactMatchGrader(Grader):
    Config = ExactMatchConfig
    config: ExactMatchConfig

    def __init__(self, config: ExactMatchConfig, context: GraderContext):
        super().__init__(config, context)
        targets = [config.target] if isinstance(config.target, str) else config.target
        self._targets = [
            Template(t, name=f"grader.target[{i}]", base_dir=context.base_dir) for i, t in enumerate(targets)
        ]
        extract = config.extract
        self._regex = re.compile(extract.pattern) if isinstance(extract, ExtractSpec) else None
        self._numeric = extract == "number"

    @property
    def fields(self) -> frozenset[str]:
        return frozenset().union(*(t.variables for t in self._targets))

    def target(self, task: Task) -> str | list[str]:
        values = [self._norm(t.render(task)) for t in self._targets]
        return values[0] if len(values) == 1 else values

    def _norm(self, text: str) -> str:
        text = normalize(text, list(self.config.normalize))
        if self._numeric:
            number = extract_number(text)
            return normalize(number, ["number"]) if number is not None else text
        return text

    def extract(self, response: str) -> str | None:
        """The answer found in ``response`` (None when there is none)."""
        if self._numeric:
            return extract_number(response)
        if self._regex is not None:
            spec = self.config.extract
            assert isinstance(spec, ExtractSpec)
            matches = list(self._regex.finditer(response))
            if not matches:
                return response if spec.fallback == "whole" else None
            m = matches[-1] if spec.match == "last" else matches[0]
            try:
                return m.group(spec.group)
            except IndexError:
                return None
        return response

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        targets = self.target(task)
        target_list = [targets] if isinstance(targets, str) else targets
        extracted = self.extract(answer)
        if extracted is None:
            return Grade.ungradeable(
                "no answer could be extracted from the response", extracted=None, target=targets
            )
        value = self._norm(extracted)
        if value in target_list:
            return Grade.correct("the answer matches", extracted=value, target=targets)
        return Grade.incorrect("the answer does not match", extracted=value, target=targets)
