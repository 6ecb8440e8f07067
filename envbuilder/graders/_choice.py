"""The ``choice`` grader: multiple-choice answers given as a letter (or an index)."""

from __future__ import annotations

import re
import string
from typing import Any, Literal

from pydantic import Field

from envbuilder.graders._answer import COPULA, PHRASE, run_items
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
from envbuilder.templating import Template

_MAX_CHARS = 20_000

# How models state a choice, most explicit first; each captures the letter (or number).
_STATED = [
    re.compile(r"\\boxed\{\s*\(?([A-Za-z]|\d+)\)?\s*\}"),
    # The answer phrases every text grader reads (envbuilder.graders._answer: "The answer is",
    # "La réponse est", "答案是"…), or "choice"/"option"; a word of certainty may follow ("The
    # answer is for sure D"). Letters in capitals only here: "the answer is a bit long" names no option.
    re.compile(
        rf"(?i:{PHRASE}|choice|option)\s*(?i:{COPULA})?\s*[:=]?\s*(?i:option\s+|choice\s+)?"
        r"(?i:(?:for\s+sure|clearly|definitely|certainly|obviously)\s*,?\s+)?"
        r"[\(\[\*\"'`]*([A-Z]|\d+)\b(?![\w'])"
    ),
    # The last words name it: "…, therefore I think it's B."
    re.compile(r"\b(?i:it's|it\s+is|i\s+choose|i\s+pick|i\s+go\s+with)\s+\(?([A-Z])\)?[\s.!)*]*$"),
]
# The whole answer is the choice: "B", "(B)", "b.", "**B**", "2".
_ALONE = re.compile(r"^\W*([A-Za-z]|\d+)\W*$")
# The answer starts with the choice, then its text: "B) 42", "(B) 42", "B. 42", "B: 42", "B。不是 A"
# (a letter followed by an ideographic full stop or by ideographs).
_LEADING = re.compile(r"^\W*\(?([A-Za-z]|\d+)(?:[\).:]\s|。|(?=[\u3400-\u9fff]))")
# An answer made only of option letters, each standing alone ("A B C D", "(A) (B)", "A, B or C");
# not a word of capitals ("DRAM", "II and III", "O(D)": an option's text).
_ONLY_LETTERS = re.compile(r"^\W*\(?[A-Z]\)?(?:(?:\s*[,;/&]\s*|\s+(?:and|or)\s+|\s+)\(?[A-Z]\)?)*[\W]*$")
_BOXED_LETTER = re.compile(r"\\boxed\{\s*\(?([A-Z])\)?\s*\}")


class ChoiceConfig(GraderConfig):
    """Correct when the answer names the right option of a multiple-choice question."""

    type: Literal["choice"]
    target: str
    """Jinja template over the task giving the correct option, as a letter (`B`) or an index
    (`1`, counted from `index_base`), e.g. `{{ answer }}`."""
    choices_field: str | None = None
    """The task field holding the list of options: bounds the valid letters, and an answer
    that repeats one option's text exactly counts as that option."""
    num_choices: int | None = Field(default=None, ge=2, le=26)
    """How many options there are, when there is no `choices_field` (default: up to Z)."""
    index_base: Literal[0, 1] = 0
    """Whether a numeric target (and a numeric answer) counts from 0 (`0` = A) or 1 (`1` = A)."""
    accept_numbers: bool = False
    """Also accept an answer naming the option by number (`2`), counted from `index_base`."""


class ChoiceGrader(Grader):
    Config = ChoiceConfig
    config: ChoiceConfig
    reads_only_fields = True  # the task through its target templates and named fields only
    task_free = True  # waits only on futures and its own tasks (offloads, verdicts)

    def __init__(self, config: ChoiceConfig, context: GraderContext):
        super().__init__(config, context)
        self._target = grader_template(config.target, key=("target",), context=context)

    def field_uses(self) -> list[FieldUse]:
        uses = [FieldUse(("target",), self._target.variables)]
        if self.config.choices_field:
            uses.append(FieldUse(("choices_field",), frozenset({self.config.choices_field}), named=True))
        return uses

    def missing_target(self, task: Task) -> str | None:
        return why_target_missing([self._target], task)

    def _options(self, task: Task) -> list[Any] | None:
        name = self.config.choices_field
        value = task.get(name) if name else None
        return list(value) if isinstance(value, list | tuple) else None

    def _count(self, task: Task) -> int:
        options = self._options(task)
        if options is not None:
            return min(len(options), 26)
        return self.config.num_choices or 26

    def _letter(self, token: str, count: int) -> str | None:
        """``token`` as an option letter, or None when it names no option."""
        if token.isdecimal():  # (not isdigit: int() refuses '²')
            if len(token) > 2:  # no option has a longer number (and int() refuses 4,301 digits)
                return None
            index = int(token) - self.config.index_base
        elif len(token) == 1 and token.isalpha():
            index = string.ascii_uppercase.index(token.upper())
        else:
            return None
        return string.ascii_uppercase[index] if 0 <= index < count else None

    def target_templates(self) -> list[Template]:
        return [self._target]

    def target(self, task: Task) -> str | None:
        try:
            text = render_target(self._target, task)
        except MissingTarget:
            return None
        return self._letter(text.strip().strip("()."), self._count(task))

    @staticmethod
    def hedged(answer: str) -> list[str]:
        """The different options an answer names at once (a hedge, not an answer): an answer
        of letters only (``A B C D``), or several boxes in a row (``\\boxed{A} \\boxed{B}``)."""
        text = answer.strip()[:_MAX_CHARS]
        if _ONLY_LETTERS.match(text):
            letters = list(dict.fromkeys(re.findall(r"[A-Z]", text)))
            if len(letters) > 1:
                return letters
        found = [(m.start(), m.end(), m.group(1)) for m in _BOXED_LETTER.finditer(text)]
        if len(found) > 1:
            letters = run_items(text, found)
            if len(letters) > 1:
                return letters
        return []

    def extract(self, answer: str, task: Task) -> str | None:
        """The option letter the answer names (None when it names none clearly)."""
        count = self._count(task)
        text = answer.strip()[:_MAX_CHARS]
        numbers = self.config.accept_numbers

        def usable(token: str) -> str | None:
            return None if token.isdigit() and not numbers else self._letter(token, count)

        for pattern in (_ALONE, _LEADING):
            m = pattern.match(text)
            if m and (letter := usable(m.group(1))):
                return letter
        for pattern in _STATED:
            for m in reversed(list(pattern.finditer(text))):
                if letter := usable(m.group(1)):
                    return letter
        options = self._options(task)
        if options:
            folded = " ".join(text.lower().split())
            hits = [i for i, o in enumerate(options[:count]) if " ".join(str(o).lower().split()) == folded]
            if len(hits) == 1:
                return string.ascii_uppercase[hits[0]]
        return None

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        try:
            render_target(self._target, task)
        except MissingTarget as exc:
            return Grade.ungradeable(exc.reason, target=None)
        target = self.target(task)
        if target is None:
            # (not quoted in the reason, which reaches the agent: in the `target` detail)
            return Grade.ungradeable(
                "the task's target names no option", target=render_target(self._target, task)
            )
        hedge = self.hedged(answer)
        if hedge:
            return Grade.incorrect(
                f"several options named at once ({', '.join(hedge)}): a hedge is not an answer",
                target=target,
            )
        letter = self.extract(answer, task)
        if letter is None:
            return Grade.ungradeable("no option letter could be found in the answer", target=target)
        if letter == target:
            return Grade.correct("the right option", extracted=letter, target=target)
        return Grade.incorrect("a wrong option", extracted=letter, target=target)
