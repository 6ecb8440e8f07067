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
# "The final answer is", "Answer:", and the same in other languages (the answer phrases of
# lm-evaluation-harness, lighteval and Minerva, Spanish, French, German, Portuguese, Italian,
# Chinese, Japanese, Russian, Arabic).
_PHRASE = (
    r"(?:final\s+answer|the\s+answer|answer|respuesta\s+final|la\s+respuesta|respuesta|"
    r"r[ée]ponse\s+finale|la\s+r[ée]ponse|r[ée]ponse|die\s+antwort|antwort|endergebnis|"
    r"a\s+resposta|resposta|la\s+risposta|risposta|最终答案|答案|答え|ответ|الإجابة|الجواب)"
)
_COPULA = r"(?:is\b|es\b|est\b|ist\b|é\b|è\b|是|为|為|は|:|：|=|هي|هو)"
_STATED = re.compile(
    rf"{_PHRASE}\s*(?:\*\*)?\s*{_COPULA}\s*(?:[:：=]\s*)?(?:\*\*)?(?P<rest>.+)",
    re.IGNORECASE | re.DOTALL,
)
# Inside a stated answer written as a sentence ("The largest $n$ is 34."), the value follows its
# last verb of being.
_SENTENCE_COPULA = re.compile(r"\s(?:is|are|was|equals|es|est|ist|é|è)\s+|=|是|为|為", re.IGNORECASE)
# The first value in prose: a LaTeX command with its braces, or a number (with a fraction).
_FIRST_VALUE = re.compile(r"\\[A-Za-z]+(?:\s*\{[^{}]*\})+|[-+−]?\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?")
# A sentence ends at a full stop followed by a space and not a digit ("12,000,023. I hope…"),
# or at an ideographic full stop.
_SENTENCE_END = re.compile(r"\.\s+(?=\D)|。")
# What may stand between boxes (or math spans) that together state one answer: "\boxed{1},
# \boxed{2}", "\boxed{k = 45} \quad \text{and} \quad \boxed{n = 2}", and the name the next
# value is given ("y_1 = \boxed{…} and y_2 = \boxed{…}").
_SEPARATOR = re.compile(
    r"\\(?:text|mbox|textbf|mathrm)\s*\{[^{}]{0,40}\}|\\q?quad(?![A-Za-z])|\\[,;:!]|\\[()\[\]]|"
    r"(?<![A-Za-z\\])[A-Za-z](?:_\{?\w{1,3}\}?)?\s*=(?!=)|"
    r"\$|[\s,;.]|\b(?:and|or|und|oder|et|ou|y|o|e)\b|和|或|、",
    re.IGNORECASE,
)
# A LaTeX command written with its backslash doubled, as in a JSON-escaped answer (`\\frac`);
# not a row break followed by a command (`0\\\end{pmatrix}`: three backslashes).
_DOUBLED = re.compile(
    r"(?<!\\)\\\\(?=(?:left|right|[dtc]?frac|sqrt|pi|boxed|text|mathrm|mathbf|leq?|geq?|neq?|infty|"
    r"cdot|times|circ|in|cup|cap|pm|begin|end|quad|qquad|dots|ldots|cdots|theta|alpha|beta)(?![A-Za-z]))"
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


def boxes(text: str) -> list[tuple[int, int, str]]:
    """Every ``\\boxed{…}`` (or ``\\fbox{…}``, or ``\\boxed 5``) in ``text``: (start, end,
    content), in order."""
    found = []
    pairs: dict[int, int] | None = None
    for m in _BOXED.finditer(text):
        end = m.end()
        if end < len(text) and text[end] == "{":
            pairs = _brace_pairs(text) if pairs is None else pairs
            if end in pairs:
                found.append((m.start(), pairs[end] + 1, text[end + 1 : pairs[end]]))
        elif m.group().endswith((" ", "\t")):
            word = _BOXED_WORD.match(text, end)
            if word:
                found.append((m.start(), word.end(), word.group()))
    return found


def last_boxed(text: str) -> str | None:
    """The content of the last box in ``text`` (see :func:`boxes`)."""
    found = boxes(text)
    return found[-1][2] if found else None


def run_items(text: str, items: list[tuple[int, int, str]]) -> list[str]:
    """The contents of the last item and of the items before it that only separators part
    (``\\boxed{1}, \\boxed{2}``), in order; repeated contents once."""
    first = len(items) - 1
    while first > 0 and not _SEPARATOR.sub("", text[items[first - 1][1] : items[first][0]]).strip():
        first -= 1
    return list(dict.fromkeys(c.strip() for _, _, c in items[first:] if c.strip()))


def run_of(text: str, items: list[tuple[int, int, str]]) -> str:
    """:func:`run_items` joined as one answer (``1, 2``)."""
    contents = run_items(text, items)
    return ", ".join(contents) if contents else items[-1][2].strip()


def _strip_delimiters(span: str) -> str:
    span = span.strip()
    for opening, closing in (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$")):
        if span.startswith(opening) and span.endswith(closing) and len(span) >= len(opening) + len(closing):
            return span[len(opening) : len(span) - len(closing)].strip()
    return span


def answer_span(text: str) -> tuple[str, str]:
    """(the final answer in ``text``, where it was found: ``boxed``, ``stated``, ``math`` or
    ``whole``). The last stated answer wins: a box, unless a stated answer with a value comes
    after it ("… \\boxed{255} … The final answer is $10,455$."); several boxes or math spans
    parted only by separators are one answer (a set, a tuple, or a hedge between values)."""
    text = _DOUBLED.sub(r"\\", text)
    found = boxes(text)
    stated = _last_stated(text)
    if found and not (stated is not None and stated[0] > found[-1][0] and _has_value(stated[1])):
        return run_of(text, found), "boxed"
    if stated is not None:
        return stated[1], "stated"
    math = [(m.start(), m.end(), _math_content(m)) for m in _MATH.finditer(text)]
    if math:
        return run_of(text, math), "math"
    return _strip_delimiters(text), "whole"


def _last_stated(text: str) -> tuple[int, str] | None:
    """(where, the answer) of the last answer phrase in ``text`` that is followed by one."""
    found = None
    for m in _STATED.finditer(text):
        found = m
    if found is None:
        return None
    rest = found.group("rest")
    # "Final Answer: The final answer is 12. I hope it is correct.": the inner phrase wins.
    inner = _STATED.search(rest.split("\n")[0])
    while inner is not None:
        rest = inner.group("rest")
        inner = _STATED.search(rest.split("\n")[0])
    return found.start(), _stated_value(rest)


def _stated_value(rest: str) -> str:
    rest = rest.strip().split("\n")[0].strip()
    math = list(_MATH.finditer(rest))
    if math and math[0].start() == 0:
        return _math_content(math[0])
    sentence = _SENTENCE_END.split(rest)[0].strip()
    if is_prose(sentence) and not re.match(r"[-+−(\[{\\\d]", sentence):
        # A sentence that opens with words: "The largest $n$ is 34.", "Jane started growing
        # Sphere 3 hours ago." (one that opens with the value is cut where its prose starts)
        # (an `=` inside a math span is the value's own: `$x-2y+z-1=0$`)
        masked = _MATH.sub(lambda m: " " * len(m.group()), sentence)
        copulas = list(_SENTENCE_COPULA.finditer(masked))
        if copulas:
            return _stated_value(sentence[copulas[-1].end() :])
        math = list(_MATH.finditer(sentence))
        if math:
            return _math_content(math[0])
        value = _FIRST_VALUE.search(sentence)
        if value:
            return value.group()
    if math:
        return _math_content(math[0])
    # "5, since 3+2=5.": the prose is cut at "since"; the comma before it belongs to the prose.
    return _strip_delimiters(_cut_prose(sentence).rstrip().rstrip(".,;:").rstrip())


def _has_value(text: str) -> bool:
    return bool(re.search(r"\d|\\[A-Za-z]", text))


_WORDS = re.compile(r"[^\W\d_]{2,}\s+[^\W\d_]{2,}")
_IDEOGRAPHS = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def is_prose(text: str) -> bool:
    """Two words in a row outside LaTeX commands, or any ideographs: a sentence, not a value."""
    bare = re.sub(r"\\[A-Za-z]+", " ", text)
    bare = re.sub(r"\$[^$]*\$", " ", bare)
    return bool(_WORDS.search(bare) or _IDEOGRAPHS.search(bare))


def _cut_prose(text: str) -> str:
    ideograph = _IDEOGRAPHS.search(text)
    if ideograph and ideograph.start() > 0:
        text = text[: ideograph.start()]  # "(\\frac{2}{5}) 吨": the unit word goes
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
    s = re.sub(r"(?<=\d),\s*\\!\s*(?=\d)", ",", s)  # `11,\! 111`: a thousands separator
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
    """The value of an answer written as an assignment to one variable (``x = 5`` → ``5``),
    or the values of a list of assignments (``y_1 = 2x, y_2 = 3x`` → ``2x, 3x``)."""
    m = _ASSIGNMENT.fullmatch(text)
    if m and "=" not in m.group(1):
        return m.group(1)
    items = _top_level_split(text)
    if len(items) > 1:
        values = [_ASSIGNMENT.fullmatch(item) for item in items]
        if all(v and "=" not in v.group(1) for v in values):
            return ", ".join(v.group(1).strip() for v in values if v)
    return text


def _top_level_split(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and braces."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items]


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
