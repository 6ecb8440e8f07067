"""What `envbuilder init` guesses from a dataset's first rows: prompt, answer, grader and id.

Every guess is made from the rows a spec's checks look at (:data:`SAMPLE_ROWS`), so whatever
is guessed holds for them: a target that is null in some of them is filtered out, and said.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Literal

from envbuilder.data import Row
from envbuilder.errors import DataError, name_hint

__all__ = ["ANSWER_COLUMNS", "PROMPT_COLUMNS", "Guess", "guess"]

PROMPT_COLUMNS = ("question", "prompt", "problem", "instruction", "input", "query", "text", "content")
#: Columns an `instruction` prompt goes on with when they are not empty (Alpaca's `input`, Dolly's
#: `context`): the prompt is the instruction, then the input.
_FOLLOWING = ("input", "context")
ANSWER_COLUMNS = (
    "answer", "final_answer", "solution", "label", "target", "output", "gold", "reference", "response",
    "completion", "correct_answer",
)  # fmt: skip
_CHOICE_COLUMNS = ("choices", "options", "candidates", "answers")
_ID_COLUMNS = ("id", "uid", "unique_id", "question_id", "problem_id", "task_id", "example_id", "qid")
_NUMBER = re.compile(r"^\s*[-+]?\$?\s*[\d,]*\.?\d+\s*%?\s*$")
_LATEX = re.compile(r"\\[A-Za-z]+|\\[,;!]|[\^_]\{|\$")
_SHORT = 100  # characters: a longer median target is prose, not an answer to match
_LETTER = re.compile(r"^\s*\(?([A-Z])\)?\s*$")

Grader = Literal["exact_match", "math", "choice"]


@dataclass
class Guess:
    """The columns and grader guessed for a dataset."""

    prompt: str
    """The prompt column."""
    conversation: bool
    """Whether the prompt column holds the conversation (a list of `{role, content}` turns)."""
    prompt_expr: str
    """The Jinja expression of the prompt text over the task (``question``, ``turns[0]``)."""
    prompt_more: str | None
    """A column whose text follows the prompt's when it is not empty (Alpaca's `input`)."""
    answer: str
    """The answer column."""
    target: str
    """The Jinja expression of the grading target (``answer``, ``reference[0]``)."""
    grader: Grader
    numeric: bool
    """The targets are numbers: compare the response's final number."""
    gsm8k_style: bool
    """The answers end with ``#### <number>``."""
    choices: str | None
    """For the `choice` grader: the column listing the options."""
    id_column: str | None
    """A column of unique ids other than `id` (which is used without saying)."""
    without_target: int
    """Sample rows whose target is null or empty."""
    without_prompt: int
    """Sample rows whose prompt column is null or empty."""
    sampled: int
    free_text: bool = False
    """The targets are long free text (over ``_SHORT`` characters): no exact answer to match."""
    private: list[str] = dataclasses.field(default_factory=list)
    """Columns besides the answer that give it away (a worked `solution`, a `label` equal to
    it), as the gold-leak audit of `validate` finds them: clients must not see them either."""
    exclude: list[str] = dataclasses.field(default_factory=list)
    """Columns dropped from the tasks: a dataset's own `id` that cannot be the task id (it
    repeats, is empty, or gives the answer away)."""

    def missing(self) -> list[tuple[str, int, str]]:
        """``(column, sample rows, what they lack)`` of the target and prompt columns null or
        empty on some sample rows. A `filter:` can drop those rows when the column's name is
        an identifier (a filter names columns as Jinja variables)."""
        found = [
            (self.target.partition("[")[0], self.without_target, "to grade against"),
            (self.prompt, self.without_prompt, "to ask"),
        ]
        return [m for m in found if m[1]]

    def describe(self) -> str:
        """``grader math``, ``grader exact_match, extract: number``, ``grader choice (options: x)``."""
        if self.grader == "choice":
            return f"grader choice (options: {self.choices})"
        return (
            "grader exact_match, extract: number"
            if self.grader == "exact_match" and self.numeric
            else (f"grader {self.grader}")
        )


def guess(rows: list[Row], columns: list[str], prompt: str | None, answer: str | None) -> Guess:
    """Guess from ``rows`` (the first rows of the first split); ``prompt``/``answer`` are given
    columns. Raises DataError when a column is unknown or no column can be guessed."""
    for given in (prompt, answer):
        if given is not None and given not in columns:
            raise DataError(
                f"the data has no column {given!r}", hint=name_hint(given, columns, "Its columns are")
            )
    # A column the user named as the answer is never guessed as the prompt (the gold would leak;
    # naming one column as both is written as asked, and validation reports the leak).
    prompt, conversation, prompt_expr = _prompt(rows, [c for c in columns if c != answer], prompt)
    answer = answer or _answer(rows, columns, prompt)
    more = _following(rows, columns, prompt, answer) if prompt_expr == prompt else None
    target = f"{answer}[0]" if _all(rows, answer, _is_string_list) else answer
    values = [_value(row, target) for row in rows]
    present = [v for v in values if v not in (None, "")]
    if rows and not present:
        raise DataError(
            f"the answer column {answer!r} is empty in all of the first {len(rows)} rows",
            hint=f"Its columns are: {', '.join(columns)}; pass --answer-column",
            code="scaffold_no_answer",
        )
    gsm8k_style = bool(present) and all(isinstance(a, str) and "####" in a for a in present)
    choices = _choices(rows, columns, present)
    texts = sorted(len(a) for a in present if isinstance(a, str))
    free_text = bool(texts) and texts[len(texts) // 2] > _SHORT and not gsm8k_style
    numeric = gsm8k_style or (bool(present) and all(map(_is_number, present)))
    # LaTeX answers, or worked solutions ending in \boxed{...} beside short answers: the math grader.
    latex = any(isinstance(a, str) and _LATEX.search(a) for a in present)
    boxed = any(_all(rows, c, lambda v: isinstance(v, str) and "\\boxed" in v) for c in columns)
    grader: Grader = "exact_match"
    if choices is not None:
        grader, numeric = "choice", False
    elif not numeric and (latex or boxed) and bool(texts) and texts[-1] <= _SHORT:
        grader = "math"
    targets = [str(v).split("####")[-1] if gsm8k_style and v is not None else v for v in values]
    shown = [prompt, *([more] if more else [])]
    id_column, exclude, private = _public(rows, columns, answer, shown, targets)
    return Guess(
        prompt=prompt, conversation=conversation, prompt_expr=prompt_expr, prompt_more=more,
        answer=answer, target=target, grader=grader, numeric=numeric, gsm8k_style=gsm8k_style,
        choices=choices, id_column=id_column, without_target=len(values) - len(present),
        without_prompt=sum(r.get(prompt) in (None, "", []) for r in rows), sampled=len(rows),
        free_text=free_text, private=private, exclude=exclude,
    )  # fmt: skip


def _public(
    rows: list[Row], columns: list[str], answer: str, shown: list[str], targets: list[Any]
) -> tuple[str | None, list[str], list[str]]:
    """The task id column, the columns to exclude, and those to make private: every column a
    client would see that the gold-leak audit of `validate` finds giving the answer away."""
    from envbuilder.authoring._leaks import leaking_fields

    id_column, usable_id = _id_column(rows, columns)
    exclude = ["id"] if "id" in columns and not usable_id and id_column is None else []
    for _ in range(2):  # once more when the task ids turn out to give the answer away
        own_id = id_column or ("id" if "id" in columns and not exclude else None)
        tasks = [
            {
                **({"id": r.get(own_id)} if own_id else {}),
                **{c: r.get(c) for c in columns if c not in (answer, "id")},
            }
            for r in rows
        ]
        prompts = [[r.get(c) for c in shown] for r in rows]
        leaking = leaking_fields(tasks, targets, prompts)
        if "id" not in leaking:
            break
        # Ids that give the answer away: `<split>-<row>` ids instead.
        id_column, exclude = None, ["id"] if "id" in columns else []
    private = [c for c in leaking if c not in ("id", *shown)]
    return id_column, exclude, private


def _prompt(rows: list[Row], columns: list[str], given: str | None) -> tuple[str, bool, str]:
    """The prompt column, whether it is a conversation, and the expression of its text."""
    if given is not None:
        if _all(rows, given, _is_conversation):
            return given, True, given
        return given, False, f"{given}[0]" if _all(rows, given, _is_string_list) else given
    strings = [c for c in columns if _all(rows, c, lambda v: isinstance(v, str))]
    # A column empty on most rows (Alpaca's `input`) is no prompt while another has text.
    full = [c for c in strings if 2 * sum(bool(str(r.get(c) or "").strip()) for r in rows) > len(rows)]
    named = _named(full, PROMPT_COLUMNS)
    if named:
        return named, False, named
    conversations = [c for c in columns if _all(rows, c, _is_conversation)]
    if conversations:
        return conversations[0], True, conversations[0]
    lists = _named([c for c in columns if _all(rows, c, _is_string_list)], (*PROMPT_COLUMNS, "turns"))
    if lists:
        return lists, False, f"{lists}[0]"
    # The longest text column, when it holds text rather than labels (`category`: few values).
    text = [c for c in strings if len(rows) < 4 or 2 * len({r.get(c) for r in rows}) > len(rows)]
    if text:
        best = max(text, key=lambda c: sum(len(v) for r in rows if isinstance(v := r.get(c), str)))
        return best, False, best
    named = _named(strings, PROMPT_COLUMNS)  # mostly empty, but named so
    if named:
        return named, False, named
    raise DataError(
        "no text column to use as the prompt",
        hint=f"Its columns are: {', '.join(columns)}; pass --prompt-column",
        code="scaffold_no_prompt",
    )


def _following(rows: list[Row], columns: list[str], prompt: str, answer: str) -> str | None:
    """The text column that follows an `instruction` prompt when not empty (:data:`_FOLLOWING`)."""
    if prompt.lower() != "instruction":
        return None
    texts = [c for c in columns if c not in (prompt, answer) and _all(rows, c, lambda v: isinstance(v, str))]
    return _named(texts, _FOLLOWING)


def _answer(rows: list[Row], columns: list[str], prompt: str) -> str:
    named = [c for c in (_named([c], ANSWER_COLUMNS) for c in columns if c != prompt) if c]
    named.sort(key=lambda c: ANSWER_COLUMNS.index(c.lower()))
    # Prefer a column that has a value in every sample row over one with gaps.
    full = [c for c in named if all(r.get(c) not in (None, "") for r in rows)]
    if full or named:
        return (full or named)[0]
    raise DataError(
        "cannot tell which column holds the answer",
        hint=f"Its columns are: {', '.join(columns)}; pass --answer-column",
        code="scaffold_no_answer",
    )


def _choices(rows: list[Row], columns: list[str], targets: list[Any]) -> str | None:
    """The options column when the targets name an option: a letter, or an index into it."""
    column = _named([c for c in columns if _all(rows, c, _is_string_list)], _CHOICE_COLUMNS)
    if column is None or not targets:
        return None
    sizes = [len(r[column]) for r in rows if r.get(column)]
    if not sizes or not (min(sizes) >= 2 and max(sizes) <= 26):
        return None
    smallest = min(sizes)
    letters = all(isinstance(t, str) and _LETTER.match(t) for t in targets)
    indexes = all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < smallest for t in targets)
    return column if letters or indexes else None


def _id_column(rows: list[Row], columns: list[str]) -> tuple[str | None, bool]:
    """A column of unique ids other than `id` (None: `id` or none), and whether `id` is one."""
    candidates = [c for c in columns if c.lower() in _ID_COLUMNS or c.lower().endswith("_id")]
    for column in sorted(candidates, key=lambda c: (c.lower() not in _ID_COLUMNS, columns.index(c))):
        values = [r.get(column) for r in rows]
        scalar = all(isinstance(v, str | int) and not isinstance(v, bool) and v != "" for v in values)
        if rows and scalar and len(set(values)) == len(values):
            # `id` is the task id without saying
            return (None, True) if column == "id" else (column, False)
    return None, False


def _named(columns: list[str], names: tuple[str, ...]) -> str | None:
    by_lower = {c.lower(): c for c in columns}
    return next((by_lower[n] for n in names if n in by_lower), None)


def _all(rows: list[Row], column: str, test: Any) -> bool:
    """Whether every non-null value of ``column`` passes ``test`` (and there is one)."""
    values = [r.get(column) for r in rows if r.get(column) is not None]
    return bool(values) and all(test(v) for v in values)


def _is_conversation(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(t, dict) and "role" in t and "content" in t for t in value)
    )


def _is_string_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def _value(row: Row, expr: str) -> Any:
    """The value of ``column`` or ``column[0]`` in ``row``."""
    if expr.endswith("[0]"):
        items = row.get(expr[:-3])
        return items[0] if isinstance(items, list) and items else None
    return row.get(expr)


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int | float) or (isinstance(value, str) and bool(_NUMBER.match(value)))
