"""A math answer's LaTeX cleaned for comparison, and the values it states.

The ``math`` grader reads the target and the answer through the same steps, so a gold answer
submitted verbatim always meets itself however it is written:

1. :func:`envbuilder.graders._answer.answer_span` finds the final answer (the last stated one:
   a ``\\boxed{}`` or an answer phrase, else the last math span, else the whole text, which is
   then read as bare LaTeX: ``3\\sqrt{13}`` is one expression, not the number 3).
2. :func:`clean_latex` drops what never changes the value: ``\\$`` and other currency signs,
   thin spaces (``\\!``, ``\\,``), ``\\left``/``\\right``, ``\\dfrac``/``\\tfrac`` (as
   ``\\frac``), degrees, percent signs, units words (``5 \\text{ cm}^2``, ``10 inches``),
   thousands separators (``32,348``, ``1{,}000``), Markdown bold and a trailing full stop.
3. :func:`assigned_value` reads the value it states: ``x = 5`` and ``f(x) = 5`` → ``5``; a
   chain of equalities whose sides before the last hold no variable (``17 \\bmod 5 = 2``,
   ``3^2 + 4^2 = 25``) → its last side; a congruence (``x \\equiv 2 \\pmod{5}``) → its
   residue; values joined by "and"/"or" (``12 \\text{ and } 13``) → a list (``12, 13``).
   :func:`solution_sets` reads several solutions each of several variables
   (``p = 5, q = 2 \\text{ and } p = 7, q = 2`` = ``p=5,q=2;p=7,q=2``).

:func:`plain_number` then reads the common case, a single number (``025``, ``2.5e1``,
``25/1``, ``-3.50``, ``six``), exactly and without SymPy; :func:`text_key` gives the form compared
for text answers (``\\text{(C)}`` = ``C``, ``\\text{Evelyn}`` = ``Evelyn``).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from envbuilder.graders._answer import brace_pairs
from envbuilder.graders._normalize import exact_number

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
    # A row break closing the last row (`0&1\\\\ \end{pmatrix}`) adds no row.
    (re.compile(r"\\\\\s*(?=\\end\s*\{)"), ""),
    (re.compile(r"\\\\"), r" \\\\ "),  # matrix rows: `\\-1` must not read as a command
    (re.compile(r"_\{(\d+)\}"), r"_\1"),
    (re.compile(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big)(?![A-Za-z])\s*"), ""),
    (re.compile(r"\\(?:displaystyle|textstyle)(?![A-Za-z])\s*"), ""),
    (re.compile(r"\\[dtc]frac(?![A-Za-z])"), r"\\frac"),
    # `\frac\pi2`, `\frac 59`: arguments without braces get them.
    (re.compile(r"\\frac\s*(\\[A-Za-z]+|[0-9A-Za-z])\s*(\\[A-Za-z]+|[0-9A-Za-z])"), r"\\frac{\1}{\2}"),
    (re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ(?![A-Za-z])|°|\\degree(?![A-Za-z])"), ""),
    (re.compile(r"\\?%"), ""),
    (re.compile(r"\\\$|[$€£¥₹]|\\(?:textdollar|euro|pounds)(?![A-Za-z])"), ""),
]
# `32,349` is a number; `32, 349` (a space after the comma) is a list of two.
_THOUSANDS = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_LATEX_FRACTION = re.compile(r"([-+]?)\\frac\s*(?:\{\s*(\d+)\s*\}|(\d))\s*(?:\{\s*(\d+)\s*\}|(\d))")
_TIMES_TEN = re.compile(
    r"([-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?:\\times|\\cdot|\*|x)\s*10\s*\^\s*\{?\s*([-+]?\d+)\s*\}?"
)
_TEXT_WRAPPER = re.compile(r"\\(?:text|mbox|mathrm|textrm|textbf|textit|rm|mathbf)\s*\{([^{}]*)\}")
# A variable (`x`, `y_1`) or a function of one (`f(x)`) given a value.
_ASSIGNMENT = re.compile(r"\s*[A-Za-z](?:_\{?\w+\}?)?(?:\(\s*[A-Za-z]\s*\))?\s*=\s*(.+)", re.DOTALL)
# `2x = 10 \Rightarrow x = 5`, `\therefore x = 5`: the arrows and words that lead to a result.
_CONSEQUENCE = re.compile(r"\\(?:therefore|Rightarrow|Longrightarrow|implies)(?![A-Za-z])")
# One value in square brackets, no list or interval inside (`[45]`, `[45 degrees]`).
_BRACKETED = re.compile(r"\[[^\[\](),;]*\]")
# `\text{ and }` between values: the word, so that the values become a list.
_TEXT_JOIN = re.compile(r"\\(?:text|mbox|mathrm|textrm)\s*\{\s*(and|or)\s*\}", re.IGNORECASE)
# "1orW(x)": a joining word glued to the values around it.
_GLUED_OR = re.compile(r"(?<=[\d)}])(or|and)(?=[A-Za-z\\(])")
# Between values at the top level: "and", "or", ";" part the solutions of an answer.
_ALTERNATIVES = re.compile(r"\s*(?:;|\b(?:and|or)\b)\s*", re.IGNORECASE)
# The modulus closing a congruence: `\pmod{5}`, `\pmod 5`, `(\bmod 5)`, `(\text{mod } 5)`, `\mod 5`.
_MODULUS = re.compile(
    r"\s*(?:\\pmod\s*(?:\{[^{}]*\}|\w+)|\(\s*(?:\\bmod|\\mod|\\(?:text|mathrm|operatorname|rm)\s*\{\s*mod\s*\}|mod)"
    r"\s*\{?\s*\w+\s*\}?\s*\)"
    r"|\\(?:bmod|mod)(?![A-Za-z])\s*\{?\s*\w+\s*\}?)\s*$"
)
# What an answer holds when it states a value another way: an equation, a list, a congruence.
_STATES = re.compile(r"[=,;]|mod|equiv|and|or")
# `17 \bmod 5`: a remainder of two integers.
_REMAINDER = re.compile(
    r"(?<![\w.])(-?\d{1,30})\s*\\(?:bmod|mod)(?![A-Za-z])\s*\{?\s*(\d{1,30})\s*\}?(?![\w.])"
)
_INEQUALITY = re.compile(r"[<>]|\\(?:le|ge|ne|leq|geq|neq|lt|gt|approx|sim)(?![A-Za-z])")
_BASE_NUMBER = re.compile(r"([0-9A-Fa-f]+)_\{?(\d+)\}?")


def clean_latex(span: str) -> str:
    """``span`` with what never changes its value removed (see the module docstring)."""
    s = span.strip().strip("*").strip().removeprefix("=").strip()
    # `2x = 10 \Rightarrow x = 5`, `\therefore x = 5`: the assignment after the last arrow is
    # the result (`p \Rightarrow q` is a statement of its own and stays whole).
    parts = _CONSEQUENCE.split(s) if "\\" in s else [s]
    if len(parts) > 1 and (not parts[0].strip() or "=" in parts[-1]):
        s = parts[-1].strip()
    if s.startswith("[") and _BRACKETED.fullmatch(s):
        s = s[1:-1].strip()  # `[45 degrees]`: one value in brackets (Geometry3K's form)
    s = _UNIT_TEXT.sub("", s.replace("{,}", ",").replace("**", "^"))
    s = re.sub(r"(?<=\d),\s*\\!\s*(?=\d)", ",", s)  # `11,\! 111`: a thousands separator
    for pattern, repl in _REMOVE:
        s = pattern.sub(repl, s)
    s = " ".join(s.split())
    s = re.sub(r"(?<=\d) (?=\d{3}(?!\d))", "", s) if re.fullmatch(r"[-+]?\d{1,3}(?: \d{3})+", s) else s
    s = re.sub(r"\s*\.$|(?<!\\)\\$", "", s)  # a trailing full stop, or a stray backslash (`185\`)
    units = _UNIT_WORDS.search(s)
    if units and units.start() > 0 and s[: units.start()].rstrip()[-1:] in set("0123456789}"):
        s = s[: units.start()].rstrip()
    if "\\" in s:
        s = _TEXT_JOIN.sub(r" \1 ", s)
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "").replace(" ", "")
    if s.startswith("{") and s.endswith("}") and brace_pairs(s).get(0) == len(s) - 1:
        s = s[1:-1].strip()
    return s


def plain_number(text: str) -> Fraction | None:
    """``text`` as an exact number when it is one plain number (``025``, ``-2.5e1``, ``25/1``,
    ``\\frac{3}{4}``, ``1.5 \\times 10^{3}``); else None."""
    t = text.strip().replace("−", "-")
    words = number_from_words(t)
    if words is not None:
        return Fraction(words)
    m = _TIMES_TEN.fullmatch(t)
    if m:
        t = f"{m.group(1)}e{m.group(2)}"
    m = _LATEX_FRACTION.fullmatch(t)
    if m:
        sign, n1, n2, d1, d2 = m.groups()
        t = f"{sign}{n1 or n2}/{d1 or d2}"
    return exact_number(t)


def equation_sides(text: str) -> tuple[str, str] | None:
    """The two sides of ``text`` when it is one equation with a variable (``2x+4y-3=0``), else
    None (no ``=``, several, an inequality, or a list)."""
    if text.count("=") != 1 or re.search(r"[<>]|\\(?:le|ge|ne|leq|geq|neq)(?![A-Za-z])|,|;", text):
        return None
    left, right = (side.strip() for side in text.split("="))
    if not left or not right or not re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", text)):
        return None
    return left, right


_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}


def number_from_words(text: str) -> int | None:
    """An integer written in English words: ``six``, ``twenty-five``, ``one hundred and five``,
    ``minus three``, ``two thousand twenty``; None for anything else."""
    words = text.lower().replace("-", " ").replace(",", " ").split()
    if not words or len(words) > 12:
        return None
    sign = 1
    if words[0] in ("minus", "negative"):
        sign, words = -1, words[1:]
    total = current = 0
    seen = False
    for word in words:
        if word == "and" and seen:
            continue
        if word in _NUMBER_WORDS:
            current += _NUMBER_WORDS[word]
        elif word == "hundred" and seen:
            current = max(current, 1) * 100
        elif word in _SCALES and seen:
            total += max(current, 1) * _SCALES[word]
            current = 0
        elif word == "a" and not seen:
            current = 1
        else:
            return None
        seen = True
    return sign * (total + current) if seen else None


def assigned_value(text: str) -> str:
    """The value ``text`` states (see the module docstring): ``x = 5`` → ``5``, ``y_1 = 2x, y_2
    = 3x`` → ``2x, 3x``, ``17 \\bmod 5 = 2`` → ``2``, ``x \\equiv 2 \\pmod 5`` → ``2``, ``12 and
    13`` → ``12, 13``, ``p=5,q=2;p=7,q=2`` → ``(5, 2), (7, 2)``; else ``text``."""
    if not _STATES.search(text):
        return text  # one value, most answers: nothing to read out of it
    text = _congruence(text)
    solutions = _solutions(text)
    if solutions is not None:
        return ", ".join("(" + ", ".join(value for _, value in sorted(s)) + ")" for s in solutions)
    if any(word in text for word in ("and", "or", ";")):
        parts = _split_top(_GLUED_OR.sub(r" \1 ", text), _ALTERNATIVES)
        if len(parts) > 1 and all(parts):
            text = ", ".join(parts)
    text = _chain_value(text)
    m = _ASSIGNMENT.fullmatch(text)
    if m and "=" not in m.group(1):
        return m.group(1)
    items = _top_level_split(text)
    if len(items) > 1:
        values = [_ASSIGNMENT.fullmatch(item) for item in items]
        if all(v and "=" not in v.group(1) for v in values):
            return ", ".join(v.group(1).strip() for v in values if v)
    return text


def _congruence(text: str) -> str:
    """``x \\equiv 2 \\pmod{5}`` → ``x = 2``; ``17 \\bmod 5`` → ``2``."""
    if "mod" not in text and "\\equiv" not in text:
        return text
    if "\\equiv" in text:
        text = _MODULUS.sub("", text).replace("\\equiv", "=")
    return _REMAINDER.sub(
        lambda m: str(int(m.group(1)) % int(m.group(2))) if int(m.group(2)) else m.group(), text
    )


def _chain_value(text: str) -> str:
    """The last side of a chain of equalities whose other sides hold no variable (``3^2 + 4^2 =
    25`` → ``25``; ``x = 2 + 3 = 5`` → ``x = 5``); else ``text``."""
    if "=" not in text or _INEQUALITY.search(text) or len(text) > 2000:
        return text
    sides = _split_top(text, re.compile(r"="))
    if len(sides) < 2 or not all(sides) or any(_top_level_split(side)[1:] for side in sides):
        return text
    middle = sides[:-1] if not _variable(sides[0]) else sides[1:-1]
    if not middle or any(_variable(side) for side in (*middle, sides[-1])):
        return text
    return sides[-1] if len(middle) == len(sides) - 1 else f"{sides[0]} = {sides[-1]}"


def _variable(side: str) -> bool:
    return bool(re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", side)))


def _solutions(text: str) -> list[list[tuple[str, str]]] | None:
    """Several solutions, each a list of assignments to the same two or more variables (``p = 5,
    q = 2 \\text{ and } p = 7, q = 2``, ``p=5,q=2;p=7,q=2``): each one's (variable, value)
    pairs; None for anything else."""
    if "=" not in text or len(text) > 2000:
        return None
    groups = _split_top(_GLUED_OR.sub(r" \1 ", text), _ALTERNATIVES)
    if len(groups) < 2:
        return None
    solutions = []
    for group in groups:
        pairs = []
        for item in _top_level_split(group):
            m = re.fullmatch(r"\s*([A-Za-z](?:_\{?\w+\}?)?)\s*=\s*([^=]+)", item)
            if m is None:
                return None
            pairs.append((m.group(1), m.group(2).strip()))
        solutions.append(pairs)
    names = {tuple(sorted(name for name, _ in solution)) for solution in solutions}
    if len(names) != 1 or len(next(iter(names))) < 2:
        return None
    return solutions


def solution_sets(text: str) -> frozenset[tuple[tuple[str, str], ...]] | None:
    """The solutions of ``text`` (see :func:`_solutions`) as a set, each value in its compared
    form, so that their order does not matter; None when ``text`` is not such a list."""
    solutions = _solutions(_congruence(text))
    if solutions is None:
        return None
    return frozenset(
        tuple(sorted((name, _value_key(value)) for name, value in solution)) for solution in solutions
    )


def _value_key(value: str) -> str:
    number = plain_number(value)
    return str(number) if number is not None else text_key(value)


def _split_top(text: str, separator: re.Pattern[str]) -> list[str]:
    """``text`` split where ``separator`` matches outside brackets and braces."""
    depth, depths = 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        depths.append(depth)
    parts, start = [], 0
    for m in separator.finditer(text):
        if depths[m.start()] == 0 and (m.start() == 0 or depths[m.start() - 1] == 0):
            parts.append(text[start : m.start()])
            start = m.end()
    parts.append(text[start:])
    return [part.strip() for part in parts]


def _top_level_split(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and braces."""
    return _split_top(text, re.compile(","))


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
