"""Where a math answer is in a response, and its LaTeX cleaned for comparison.

The ``math`` grader reads the target and the answer through the same two steps, so a gold
answer submitted verbatim always meets itself however it is written:

1. :func:`answer_span` finds the final answer: the last ``\\boxed{}`` (braces balanced), else
   what follows "the final answer is" / "answer:", else the last ``$…$``, ``\\(…\\)`` or
   ``\\[…\\]``, else the whole text, which is then read as bare LaTeX (``3\\sqrt{13}`` is one
   expression, not the number 3). Prose after a stated answer is cut ("5 because …").
2. :func:`clean_latex` drops what never changes the value: ``\\$`` and other currency signs,
   thin spaces (``\\!``, ``\\,``), ``\\left``/``\\right``, ``\\dfrac``/``\\tfrac`` (as
   ``\\frac``), degrees, percent signs, units words (``5 \\text{ cm}^2``, ``10 inches``),
   thousands separators (``32,348``, ``1{,}000``), Markdown bold and a trailing full stop.

:func:`plain_number` then reads the common case, a single number (``025``, ``2.5e1``,
``25/1``, ``-3.50``, ``six``), exactly and without SymPy; :func:`text_key` gives the form compared
for text answers (``\\text{(C)}`` = ``C``, ``\\text{Evelyn}`` = ``Evelyn``).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from envbuilder.graders._normalize import exact_number

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*")
_BOXED_WORD = re.compile(r"[^\s$]+")
_STATED = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)\s*(?:\*\*)?\s*(?:is\b|:|=)\s*(?:[:=]\s*)?(?:\*\*)?(?P<rest>.+)",
    re.IGNORECASE | re.DOTALL,
)
# After a stated answer, a word of four letters or more outside braces starts the prose
# ("5 because 5 > 3"); a units word cut off with it changes nothing.
_PROSE_WORD = re.compile(r"\s(?=[A-Za-z]{4,}\b)")
_NUMBER_WORDS = {
    word: value
    for value, word in enumerate(
        [
            *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
            *("eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen"),
            *("eighteen", "nineteen", "twenty"),
        ]
    )
} | {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
# Each body stops at the next opening delimiter, so a text full of unclosed ones costs linear time.
_MATH = re.compile(
    r"(?<!\\)\$\$(?P<d>(?:[^$]|\$(?!\$))+?)(?<!\\)\$\$|(?<![\\$])\$(?P<i>(?:[^$\\]|\\.)+?)(?<!\\)\$"
    r"|\\\[(?P<b>(?:(?!\\\[).)+?)\\\]|\\\((?P<p>(?:(?!\\\().)+?)\\\)",
    re.DOTALL,
)
# Words that name units (or say "degrees") after a number; dropped with any power (`cm^2`).
_UNITS = (
    "units?|square|sq|cubic|cm|mm|km|m|meters?|metres?|centimeters?|millimeters?|kilometers?|"
    "inches|inch|in|feet|foot|ft|yards?|yd|miles?|mi|mph|kph|hours?|hrs?|minutes?|mins?|"
    "seconds?|secs?|s|days?|weeks?|months?|years?|dollars?|cents?|pounds?|lbs?|ounces?|oz|"
    "grams?|g|kg|kilograms?|liters?|litres?|l|ml|gallons?|degrees?|deg|radians?|rad|"
    "percent|people|students?|points?|ways?|times|apples|cookies|books"
)
_UNIT_WORDS = re.compile(
    # At most four words: an unbounded run would make the search quadratic in the answer's length.
    rf"(?:(?:\s|^)(?:{_UNITS})\b(?:\^\{{?[23]\}}?|\s+squared|\s+cubed)?){{1,4}}\s*$",
    re.IGNORECASE,
)
_UNIT_TEXT = re.compile(
    rf"\\(?:text|mbox|mathrm|textrm|textbf|rm)\s*\{{\s*(?:{_UNITS})(?:\s+(?:{_UNITS}))*\s*\}}"
    r"(?:\^\{?[23]\}?)?",
    re.IGNORECASE,
)
_UNICODE = {"π": "\\pi ", "∞": "\\infty ", "−": "-", "×": "\\times ", "·": "\\cdot ", "√": "\\sqrt "}
_REMOVE: list[tuple[re.Pattern[str], Any]] = [
    (re.compile("[π∞−×·√]"), lambda m: _UNICODE[m.group()]),
    (re.compile(r"(?<!\\)\\[!,]"), ""),
    (re.compile(r"(?<!\\)\\(?:[;:> ]|q?quad(?![A-Za-z]))|~"), " "),
    (re.compile(r"\\\\"), r" \\\\ "),  # matrix rows: `\\-1` must not read as a command
    (re.compile(r"_\{(\d+)\}"), r"_\1"),
    (re.compile(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big)(?![A-Za-z])\s*"), ""),
    (re.compile(r"\\(?:displaystyle|textstyle)(?![A-Za-z])\s*"), ""),
    (re.compile(r"\\[dt]frac(?![A-Za-z])"), r"\\frac"),
    # `\frac\pi2`, `\frac 59`: arguments without braces get them.
    (re.compile(r"\\frac\s*(\\[A-Za-z]+|[0-9A-Za-z])\s*(\\[A-Za-z]+|[0-9A-Za-z])"), r"\\frac{\1}{\2}"),
    (re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ(?![A-Za-z])|°|\\degree(?![A-Za-z])"), ""),
    (re.compile(r"\\?%"), ""),
    (re.compile(r"\\\$|[$€£¥₹]|\\(?:textdollar|euro|pounds)(?![A-Za-z])"), ""),
]
_THOUSANDS = re.compile(r"[-+]?\d{1,3}(?:, ?\d{3})+(?:\.\d+)?")
_LATEX_FRACTION = re.compile(r"([-+]?)\\frac\s*(?:\{\s*(\d+)\s*\}|(\d))\s*(?:\{\s*(\d+)\s*\}|(\d))")
_TIMES_TEN = re.compile(
    r"([-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?:\\times|\\cdot|\*|x)\s*10\s*\^\s*\{?\s*([-+]?\d+)\s*\}?"
)
_TEXT_WRAPPER = re.compile(r"\\(?:text|mbox|mathrm|textrm|textbf|textit|rm|mathbf)\s*\{([^{}]*)\}")
_ASSIGNMENT = re.compile(r"\s*[A-Za-z](?:_\{?\w+\}?)?\s*=\s*(.+)", re.DOTALL)
_BASE_NUMBER = re.compile(r"([0-9A-Fa-f]+)_\{?(\d+)\}?")


def _brace_pairs(text: str) -> dict[int, int]:
    """The index of the ``}`` closing each ``{`` (escaped ``\\{``/``\\}`` skipped), in one pass."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    escaped = False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            pairs[stack.pop()] = i
    return pairs


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{…}`` (or ``\\fbox{…}``, or ``\\boxed 5``) in ``text``."""
    found = None
    pairs: dict[int, int] | None = None
    for m in _BOXED.finditer(text):
        end = m.end()
        if end < len(text) and text[end] == "{":
            pairs = _brace_pairs(text) if pairs is None else pairs
            if end in pairs:
                found = text[end + 1 : pairs[end]]
        elif m.group().endswith((" ", "\t")):
            word = _BOXED_WORD.match(text, end)
            if word:
                found = word.group()
    return found


def _strip_delimiters(span: str) -> str:
    span = span.strip()
    for opening, closing in (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$")):
        if span.startswith(opening) and span.endswith(closing) and len(span) >= len(opening) + len(closing):
            return span[len(opening) : len(span) - len(closing)].strip()
    return span


def answer_span(text: str) -> tuple[str, str]:
    """(the final answer in ``text``, where it was found: ``boxed``, ``stated``, ``math`` or
    ``whole``)."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed.strip(), "boxed"
    stated = None
    for m in _STATED.finditer(text):
        stated = m
    if stated is not None:
        rest = stated.group("rest").strip().split("\n")[0].strip()
        math = list(_MATH.finditer(rest))
        if math:
            return _math_content(math[0]), "stated"
        # "5, since 3+2=5.": the prose is cut at "since"; the comma before it belongs to the prose.
        return _strip_delimiters(_cut_prose(rest).rstrip().rstrip(".,;:").rstrip()), "stated"
    math = list(_MATH.finditer(text))
    if math:
        return _math_content(math[-1]), "math"
    return _strip_delimiters(text), "whole"


def _cut_prose(text: str) -> str:
    for m in _PROSE_WORD.finditer(text):
        before = text[: m.start()]
        if before.strip() and before.count("{") == before.count("}"):
            return before
    return text


def _math_content(m: re.Match[str]) -> str:
    return next(g for g in m.groups() if g is not None).strip()


def clean_latex(span: str) -> str:
    """``span`` with what never changes its value removed (see the module docstring)."""
    s = span.strip().strip("*").strip().removeprefix("=").strip()
    s = _UNIT_TEXT.sub("", s.replace("{,}", ",").replace("**", "^"))
    for pattern, repl in _REMOVE:
        s = pattern.sub(repl, s)
    s = " ".join(s.split())
    s = re.sub(r"(?<=\d) (?=\d{3}(?!\d))", "", s) if re.fullmatch(r"[-+]?\d{1,3}(?: \d{3})+", s) else s
    s = re.sub(r"\s*\.$", "", s)
    units = _UNIT_WORDS.search(s)
    if units and units.start() > 0 and s[: units.start()].rstrip()[-1:] in set("0123456789}"):
        s = s[: units.start()].rstrip()
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "").replace(" ", "")
    if s.startswith("{") and s.endswith("}") and _brace_pairs(s).get(0) == len(s) - 1:
        s = s[1:-1].strip()
    return s


def plain_number(text: str) -> Fraction | None:
    """``text`` as an exact number when it is one plain number (``025``, ``-2.5e1``, ``25/1``,
    ``\\frac{3}{4}``, ``1.5 \\times 10^{3}``); else None."""
    t = text.strip().replace("−", "-")
    if t.lower() in _NUMBER_WORDS:
        return Fraction(_NUMBER_WORDS[t.lower()])
    m = _TIMES_TEN.fullmatch(t)
    if m:
        t = f"{m.group(1)}e{m.group(2)}"
    m = _LATEX_FRACTION.fullmatch(t)
    if m:
        sign, n1, n2, d1, d2 = m.groups()
        t = f"{sign}{n1 or n2}/{d1 or d2}"
    return exact_number(t)


def assigned_value(text: str) -> str:
    """The value of an answer written as an assignment to one variable (``x = 5`` → ``5``)."""
    m = _ASSIGNMENT.fullmatch(text)
    return m.group(1) if m and "=" not in m.group(1) else text


def base_number(text: str) -> tuple[str, str] | None:
    """(digits, base) of a number written with its base, ``52_8`` or ``4210_{5}``."""
    m = _BASE_NUMBER.fullmatch(text.strip())
    return (m.group(1).lstrip("0") or "0", m.group(2)) if m else None


def text_key(text: str) -> str:
    """The form two text answers are compared in: wrappers like ``\\text{}`` dropped, case and
    spaces ignored, a lone option letter out of its brackets (``\\text{(C)}`` → ``c``)."""
    t = text
    while True:
        unwrapped = _TEXT_WRAPPER.sub(r"\1", t)
        if unwrapped == t:
            break
        t = unwrapped
    t = "".join(t.lower().split())
    m = re.fullmatch(r"[(\[]?([a-z])[)\].]?", t)
    return m.group(1) if m else t
