"""The ``math`` grader: mathematical equivalence of numeric and LaTeX answers, via ``math-verify``.

The target and the answer are read the same way (``_latex``: the final-answer span, its LaTeX
cleaned), so a gold answer meets itself bare, in ``$…$`` or in ``\\boxed{}``. Then, in order:
equal text (``\\text{(C)}`` = ``C``); numbers in a base (``52_8``, which math-verify reads as
52); plain numbers compared exactly (no 28-digit rounding, ``025`` = 25, ``2.5e1`` = 25);
two equations with the same solutions by rearranging or scaling (``y=-\\frac{1}{2}x+\\frac{3}{4}``
= ``2x+4y-3=0``); a decimal written to at least ``float_rounding`` places against an exact
value, equal when both round to the same places (``4.123106`` = ``\\sqrt{17}``; ``4.12`` is
not); anything else by math-verify's symbolic ``verify``. A side that cannot be read is ungradeable
with the reason, never a silent 0. A response with prose and no marked answer goes to
math-verify's own extraction.

``math-verify`` (and the SymPy it brings) is a core dependency, so the plain install serves
every shipped environment; it is imported when a spec uses this grader, so other specs never
pay for its import time. Its own timeouts use ``signal.alarm`` (main thread only), so they are
off. An answer decided without SymPy (the same text, plain numbers) is graded in the server;
any other goes to a grading process (``envbuilder.isolation.processes``) that is killed at
``timeout``: one C call of
SymPy on ``9^{9^{9^{9}}}`` holds the interpreter for minutes, which no thread could interrupt.
A process's verdict is remembered for the same answer and target (``_verdicts``: the last
4,096), and a sample whose check is already running waits for it, so a GRPO group whose samples
agree costs one process, not sixteen.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from pydantic import Field

from envbuilder.graders._answer import answer_span, is_prose
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
from envbuilder.graders._latex import (
    assigned_value,
    base_number,
    clean_latex,
    equation_sides,
    plain_number,
    solution_sets,
    text_key,
)
from envbuilder.graders._verdicts import Verdicts
from envbuilder.isolation import processes
from envbuilder.templating import Template

INSTALL_HINT = "It is one of envbuilder's dependencies: reinstall envbuilder, or pip install math-verify"
# A list's item numbers in prose ("1. **Count** … 2. **Conclusion**: 99"): not answers.
_ENUMERATOR = re.compile(r"(?:(?<=\s)|^)\d{1,2}\.\s+(?=\D)")
_NUMBERS = re.compile(r"[-+]?\d+(?:\.\d+)?(?:/\d+)?")
#: The longest final answer (after cleaning) handed to SymPy; MATH-500's longest is ~100 characters.
MAX_SPAN_CHARS = 1000
#: Answers up to this long are tried without SymPy in the server (cleaning is linear-time).
MAX_INLINE_CHARS = 2000
#: Verdicts of checker processes remembered (answer and target up to MAX_INLINE_CHARS together).
VERDICTS = 4096


class MathConfig(GraderConfig):
    """Correct when the answer is mathematically equal to the target (`\\frac{1}{2}` = 0.5)."""

    type: Literal["math"]
    target: str
    """Jinja template over the task giving the reference answer (LaTeX or plain), e.g.
    `{{ answer }}`; read exactly as an answer is (bare LaTeX, `$...$` or `\\boxed{}` alike). A
    target that is null or renders empty makes the task's answers ungradeable."""
    extract: Literal["latex_and_expr", "latex", "expr"] = "latex_and_expr"
    """What math-verify looks for in a response that is prose with no marked answer: LaTeX,
    plain expressions (`1/2`), or both. A marked answer (`\\boxed{}`, "the final answer is",
    `$...$`) or a bare one is always read the way the target is."""
    float_rounding: int = Field(default=6, ge=0, le=15)
    """Decimal places numbers are rounded to before comparing."""
    timeout: float = Field(default=10.0, gt=0)
    """Seconds the check may take before the answer is ungradeable."""
    max_answer_chars: int = Field(default=20_000, ge=1)
    """Longer answers are ungradeable rather than parsed."""


def _import_math_verify() -> Any:
    try:
        return importlib.import_module("math_verify")
    except ImportError:
        raise GraderConfigError(
            "the `math` grader needs the math-verify package, which is not installed",
            loc=("type",),
            hint=INSTALL_HINT,
            code="grader_missing_dependency",
        ) from None


class MathGrader(Grader):
    Config = MathConfig
    config: MathConfig
    reads_only_fields = True  # the task through its target templates and named fields only
    task_free = True  # waits only on futures and its own tasks (offloads, verdicts)
    # SymPy may think for seconds: run the call streamed, with keep-alives.
    blocking = True

    def __init__(self, config: MathConfig, context: GraderContext):
        super().__init__(config, context)
        mv = self._mv = _import_math_verify()
        # Its "timeout is disabled" warning is for callers with no timeout; ours is wait_for.
        for module in ("parser", "grader"):
            sub = getattr(mv, module, None)
            if sub is not None and hasattr(sub, "TIMEOUT_WARNING_SHOWN"):
                sub.TIMEOUT_WARNING_SHOWN = True
        self._target = grader_template(config.target, key=("target",), context=context)
        latex, expr = mv.LatexExtractionConfig(), mv.ExprExtractionConfig()
        self._pred_config = {"latex_and_expr": [latex, expr], "latex": [latex], "expr": [expr]}[
            config.extract
        ]
        self._latex_only, self._expr_only = [latex], [expr]
        # A prompt's samples often end on the same answer: one checker process per distinct one.
        self.verdicts: Verdicts[tuple[bool | None, str, str]] = Verdicts(VERDICTS, MAX_INLINE_CHARS)

    def field_uses(self) -> list[FieldUse]:
        return [FieldUse(("target",), self._target.variables)]

    def target_templates(self) -> list[Template]:
        return [self._target]

    def target(self, task: Task) -> str | None:
        try:
            return render_target(self._target, task).strip()
        except MissingTarget:
            return None

    def missing_target(self, task: Task) -> str | None:
        return why_target_missing([self._target], task)

    def _read(self, text: str, *, is_answer: bool) -> _Reading:
        """``text`` read as a final answer: its span, cleaned, and parsed (the same steps for
        the target and the answer)."""
        span, where = answer_span(text)
        whole = clean_latex(span)
        cleaned = assigned_value(whole)
        equation = equation_sides(whole)
        solutions = solution_sets(whole)
        number = plain_number(cleaned)
        if number is not None:
            return _Reading(cleaned, number, None, equation)
        mv = self._mv
        if is_answer and where == "whole" and is_prose(cleaned):
            # Prose with no marked answer (in any language): math-verify finds the last
            # expression in it; percent signs go, as they do from a marked answer.
            prose = _ENUMERATOR.sub(" ", re.sub(r"\\?%", "", text))
            parsed = mv.parse(prose, extraction_config=self._pred_config, parsing_timeout=None)
            if not parsed or isinstance(parsed[0], str):
                # Its expressions need spaces around them; "比例为13/28" has none: the last number.
                numbers = _NUMBERS.findall(prose)
                if numbers:
                    parsed = mv.parse(numbers[-1], extraction_config=self._expr_only, parsing_timeout=None)
        elif len(cleaned) > MAX_SPAN_CHARS:
            parsed = None  # SymPy would take seconds on it: no final answer is this long
        else:
            parsed = mv.parse(f"${cleaned}$", extraction_config=self._latex_only, parsing_timeout=None)
            if not parsed and "\\" not in cleaned:
                parsed = mv.parse(cleaned, extraction_config=self._expr_only, parsing_timeout=None)
        # math-verify answers [text] alone when SymPy could not read the text: nothing parsed.
        readable = bool(parsed) and not isinstance(parsed[0], str)
        return _Reading(cleaned, None, parsed if readable else None, equation, solutions)

    def _same_number(self, gold: _Reading, pred: _Reading) -> bool:
        """Exactly equal, or equal to ``float_rounding`` places when a side is a decimal
        written to at least that many places (0.333333 for 1/3; 0.33 is not)."""
        assert gold.number is not None and pred.number is not None
        if gold.number == pred.number:
            return True
        places = self.config.float_rounding
        written = max(_decimals(gold.text), _decimals(pred.text))
        return written >= places and round(gold.number, places) == round(pred.number, places)

    def _plain(self, answer: str, target: str) -> tuple[bool | None, str, str] | None:
        """What :meth:`_check` decides without SymPy (no answer, the same text, two plain
        numbers), or None when the answer needs the symbolic check."""
        gold, pred = (assigned_value(clean_latex(answer_span(t)[0])) for t in (target, answer))
        if not pred:
            return None, "", "no answer could be found in the response"
        if text_key(pred) == text_key(gold):
            return True, pred, "the answer is the target, written the same way"
        if base_number(gold) is not None or base_number(pred) is not None:
            return None
        numbers = plain_number(gold), plain_number(pred)
        if numbers[0] is None or numbers[1] is None:
            return None
        same = self._same_number(_Reading(gold, numbers[0], None), _Reading(pred, numbers[1], None))
        return same, pred, "compared as numbers"

    def _check(self, answer: str, target: str) -> tuple[bool | None, str, str]:
        """(equal, what was read from the answer, why); ``equal`` None when undecidable."""
        gold = self._read(target, is_answer=False)
        pred = self._read(answer, is_answer=True)
        if not pred.text:
            return None, "", "no answer could be found in the response"
        if text_key(pred.text) == text_key(gold.text):
            return True, pred.text, "the answer is the target, written the same way"
        if gold.solutions is not None and gold.solutions == pred.solutions:
            return True, pred.text, "the same solutions, in another order"
        bases = base_number(gold.text), base_number(pred.text)
        if bases != (None, None):
            # math-verify drops a base subscript (52_8 = 52 = 52_9): compare digits and base.
            g, p = (
                b or (t.lstrip("0") or "0", None) for b, t in zip(bases, (gold.text, pred.text), strict=True)
            )
            same = g[0] == p[0] and (g[1] == p[1] or None in (g[1], p[1]))
            return same, pred.text, "compared as numbers written in a base"
        if gold.number is not None and pred.number is not None:
            return self._same_number(gold, pred), pred.text, "compared as numbers"
        gold_parsed, pred_parsed = gold.as_parsed(), pred.as_parsed()
        if pred_parsed is None and len(pred.text) > MAX_SPAN_CHARS:
            size = f"{len(pred.text):,} characters; at most {MAX_SPAN_CHARS:,}"
            return None, _quote(pred.text), f"the final answer is too long to read ({size})"
        if pred_parsed is None:
            return None, pred.text, f"the answer {_quote(pred.text)} could not be read as mathematics"
        if gold_parsed is None:
            # (the target itself is not quoted: a reason reaches the agent, the gold only in
            # the grade's `target` detail, which is shown when the spec reveals it)
            return None, pred.text, "the task's target could not be read as mathematics"
        extracted = str(pred_parsed[-1])
        g_eq, p_eq = gold.equation, pred.equation
        if g_eq is not None and p_eq is not None and self._same_equation(g_eq, p_eq):
            return True, extracted, "the same equation, rearranged or scaled"
        approximation = self._approximates(gold, pred)
        if approximation is not None:
            return approximation, extracted, "a decimal compared with an exact value"
        equal = self._mv.verify(
            gold_parsed, pred_parsed, float_rounding=self.config.float_rounding, timeout_seconds=None
        )
        return bool(equal), extracted, "compared symbolically"

    def _sympy(self, latex: str) -> Any:
        parsed = self._mv.parse(f"${latex}$", extraction_config=self._latex_only, parsing_timeout=None)
        return parsed[0] if parsed and not isinstance(parsed[0], str) else None

    def _same_equation(self, gold: tuple[str, str], pred: tuple[str, str]) -> bool:
        """Whether two equations have the same solutions because one side minus the other is
        the same expression up to a non-zero constant factor (``y = -x/2 + 3/4`` and
        ``2x + 4y - 3 = 0``): rearranging and scaling, not squaring or dividing by a variable."""
        sympy = importlib.import_module("sympy")
        sides = [self._sympy(side) for side in (*gold, *pred)]
        if any(side is None or not isinstance(side, sympy.Expr) for side in sides):
            return False
        g, p = sides[0] - sides[1], sides[2] - sides[3]
        if not g.free_symbols or g.free_symbols != p.free_symbols or p == 0:
            return False
        ratio = sympy.simplify(g / p)
        return bool(ratio.is_number and ratio != 0 and ratio.is_finite)

    def _approximates(self, gold: _Reading, pred: _Reading) -> bool | None:
        """A decimal written to at least ``float_rounding`` places against an exact value
        (``4.123105625617661`` and ``\\sqrt{17}``): equal when both round to the same
        ``float_rounding`` places. None when neither side is such a pair."""
        places = self.config.float_rounding
        for decimal, exact in ((gold, pred), (pred, gold)):
            if decimal.number is None or exact.number is not None or exact.parsed is None:
                continue
            if _decimals(decimal.text) < places:
                continue
            value = exact.parsed[0]
            if not getattr(value, "is_number", False) or getattr(value, "free_symbols", None):
                continue
            try:
                approx = Fraction(str(importlib.import_module("sympy").N(value, 40)))
            except (TypeError, ValueError, ZeroDivisionError):
                continue
            return round(approx, places) == round(decimal.number, places)
        return None

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        cfg = self.config
        try:
            target = render_target(self._target, task).strip()
        except MissingTarget as exc:
            return Grade.ungradeable(exc.reason, target=None)
        too_long = Grade.too_long(answer, cfg.max_answer_chars, "parse", target=target)
        if too_long is not None:
            return too_long
        decided = self._plain(answer, target) if len(answer) <= MAX_INLINE_CHARS else None
        try:
            if decided is None:
                decided = await self.verdicts.check(
                    (answer, target),
                    lambda: processes.run_checked(
                        check,
                        cfg.extract,
                        cfg.float_rounding,
                        answer,
                        target,
                        timeout=cfg.timeout,
                        prepare=[(warm, cfg.extract, cfg.float_rounding)],
                    ),
                )
        except processes.CheckTimeout:
            return Grade.ungradeable(f"checking the answer took over {cfg.timeout:g} s", target=target)
        except processes.WorkerFailed as exc:
            return Grade.failed(f"the answer could not be checked: {exc}", target=target)
        equal, extracted, why = decided
        if equal is None:
            return Grade.ungradeable(why, extracted=extracted or None, target=target)
        if equal:
            return Grade.correct(f"the answer is equivalent ({why})", extracted=extracted, target=target)
        return Grade.incorrect(f"the answer is not equivalent ({why})", extracted=extracted, target=target)


_checkers: dict[tuple[str, int], MathGrader] = {}


def _checker(extract: str, float_rounding: int) -> MathGrader:
    grader = _checkers.get((extract, float_rounding))
    if grader is None:
        config = MathConfig.model_validate(
            {"type": "math", "target": "{{ answer }}", "extract": extract, "float_rounding": float_rounding}
        )
        grader = _checkers[(extract, float_rounding)] = MathGrader(config, GraderContext())
    return grader


@processes.worker_function
def check(extract: str, float_rounding: int, answer: str, target: str) -> tuple[bool | None, str, str]:
    """:meth:`MathGrader._check` in a fresh grading process."""
    return _checker(extract, float_rounding)._check(answer, target)


_WARM = (
    "$\\frac{1}{2}x$", "$-\\dfrac{5}{2}$", "$2\\sqrt{3}$", "$(1, \\pi/3)$", "$x^2+2x+1$", "$[0, 1)$",
    "$\\{1,2\\}$", "$3.14$", "$10^\\circ$", "$\\infty$", "$x = 5$", "$2^{10}$", "$\\log_2 8$",
    "$\\sin(x)$", "$\\begin{pmatrix}1\\\\2\\end{pmatrix}$", "$\\text{(A)}$",
)  # fmt: skip
"""Answers of the usual shapes a zygote checks once before forking (a fresh child then starts
with math-verify's and SymPy's lazy imports done and their parsers' tables built: about a
quarter less time on the first check of an answer)."""


@processes.worker_function
def warm(extract: str, float_rounding: int) -> bool:
    """Run in a zygote: build the checker for this setting and check answers of the usual
    shapes once (:data:`_WARM`), before any child is forked."""
    checker = _checker(extract, float_rounding)
    for answer in _WARM:
        checker._check(answer, answer.strip("$"))
    return True


@dataclass(frozen=True)
class _Reading:
    text: str
    """The final answer's span, cleaned."""
    number: Fraction | None
    """Its exact value when it is one plain number."""
    parsed: list[Any] | None
    """math-verify's parse ([expression, text]) otherwise; None when nothing parsed."""
    equation: tuple[str, str] | None = None
    """The two sides when the answer is one equation (``2x + 4y - 3 = 0``)."""
    solutions: frozenset[tuple[tuple[str, str], ...]] | None = None
    """Several solutions of several variables each (:func:`~envbuilder.graders._latex.solution_sets`)."""

    def as_parsed(self) -> list[Any] | None:
        """What math-verify compares: its own parse, or the exact number as a SymPy Rational."""
        if self.number is None:
            return self.parsed
        # SymPy comes with the `math` extra; imported like math-verify, only when grading.
        rational = importlib.import_module("sympy").Rational
        return [rational(self.number.numerator, self.number.denominator), self.text]


def _decimals(text: str) -> int:
    m = re.fullmatch(r"[-+]?\d*\.(\d+)", text.strip())
    return len(m.group(1)) if m else 0


def _quote(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
