"""Answer extraction and normalisation shared by the text-matching graders."""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Callable
from fractions import Fraction

from envbuilder.graders._answer import OR_PAIR, final_statement, prose_alternatives

_CURRENCY = "$€£¥₹"
_NUMBER = re.compile(
    rf"[-+−]?[{_CURRENCY}]?\s?(?:(?:\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.\d+)?|\.\d+)"
    r"(?:[eE][-+]?\d+)?(?:/\d+(?!\.\d))?"
)
# Longer numbers (or exponents) are not read: exact arithmetic on them could take unbounded time.
_MAX_DIGITS = 1000
_MAX_EXPONENT = 400


_PLAIN = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?:\s*/\s*\d+)?")


def exact_number(text: str) -> Fraction | None:
    """``text`` as an exact fraction when it is one plain number (``-2.5e1``, ``025``,
    ``25/1``, ``.5``); None otherwise, and for numbers too long or exponents too large to
    compute with in bounded time. The one rule both number graders read numbers by."""
    t = text.strip()
    if len(t) > _MAX_DIGITS or not _PLAIN.fullmatch(t):
        return None
    exponent = re.search(r"[eE]([-+]?\d+)", t)
    if exponent and abs(int(exponent.group(1))) > _MAX_EXPONENT:
        return None
    try:
        return Fraction(t.replace(" ", ""))
    except (ValueError, ZeroDivisionError):
        return None


def canonical_number(text: str) -> str | None:
    """``"$1,000.50"`` → ``"1000.5"``, ``"2.5e1"`` and ``"25/1"`` → ``"25"``, ``"6/8"`` →
    ``"3/4"``; None when ``text`` holds no single number. Exact at any length (no rounding
    to 28 digits), so two different long numbers never look equal."""
    t = text.strip().replace("−", "-")
    for ch in _CURRENCY:
        t = t.replace(ch, "")
    t = t.replace(",", "").replace(" ", "").rstrip(".")
    if t.startswith("+"):
        t = t[1:]
    digits = t[1:] if t.startswith("-") else t
    if digits.isdigit() and digits.isascii() and len(t) <= _MAX_DIGITS:
        # A plain integer, most answers (GSM8K's every one): the same result as the exact
        # path below (``025`` -> ``25``, ``-0`` -> ``0``) without building a Fraction.
        return str(int(t))
    value = exact_number(t)
    if value is None:
        return None
    if value.denominator == 1:
        return str(value.numerator)
    den, twos, fives = value.denominator, 0, 0
    while den % 2 == 0:
        den, twos = den // 2, twos + 1
    while den % 5 == 0:
        den, fives = den // 5, fives + 1
    if den != 1:  # not a finite decimal: keep it as a reduced fraction
        return f"{value.numerator}/{value.denominator}"
    places = max(twos, fives)
    digits = str(abs(value.numerator) * 10**places // value.denominator).rjust(places + 1, "0")
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[:-places]}.{digits[-places:]}"


def last_number(text: str) -> str | None:
    """The last number in ``text`` (currency and thousands separators allowed)."""
    found = _NUMBER.findall(text)
    return found[-1] if found else None


def extract_number(text: str) -> str | None:
    """The final numeric answer in a free-form response: the first number of the last stated
    answer (``\\boxed{}``, ``####``, "the answer is": :func:`envbuilder.graders._answer.final_statement`,
    the rule the ``math`` grader reads by) if it holds one, else the last number."""
    statement = final_statement(text)
    if statement is not None:
        found = _NUMBER.findall(statement.text)
        if found:
            return str(found[0])
    return last_number(text)


def hedged_numbers(text: str) -> list[str]:
    """The different numbers an answer offers at once as its final answer (a hedge, not an
    answer): ``The answer is 3 or 4``, several boxes in a row (``\\boxed{3} \\boxed{4}``), or
    a statement offered as an alternative to the one before it ("Alternatively, the answer is 4")."""
    tail = text[-_MAX_HEDGE_SCAN:]
    statement = final_statement(tail)
    if statement is None:
        offered = [canonical_number(v) or v for v in prose_alternatives(tail)]
        return list(dict.fromkeys(offered)) if len(set(offered)) > 1 else []
    values = [canonical_number(v) or v for v in (*statement.alternatives, *statement.parts)]
    if len(set(values)) > 1:
        return list(dict.fromkeys(values))
    pair = OR_PAIR.search(statement.text)  # "3 or 4", "\\boxed{3 \\text{ or } 4}", "3 (or 4)"
    if pair is not None:
        a, b = (canonical_number(pair.group(g)) for g in ("a", "b"))
        if a is not None and b is not None and a != b:
            return [a, b]
    return []


_MAX_HEDGE_SCAN = 20_000


def _strip_punct(text: str) -> str:
    return "".join(
        ch for ch in text if not unicodedata.category(ch).startswith("P") and ch not in string.punctuation
    )


def _strip_leading_zeros(text: str) -> str:
    return re.sub(r"(?<![\d.])0+(?=\d)", "", text)


def _thousands(text: str) -> str:
    return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)


def _number_or_text(text: str) -> str:
    number = canonical_number(text)
    return number if number is not None else text


NORMALIZERS: dict[str, Callable[[str], str]] = {
    "strip": str.strip,
    "lower": str.lower,
    "whitespace": lambda s: " ".join(s.split()),
    "punctuation": _strip_punct,
    "currency": lambda s: s.translate({ord(c): None for c in _CURRENCY}),
    "thousands": _thousands,
    "leading_zeros": _strip_leading_zeros,
    "number": _number_or_text,
    "unicode": lambda s: unicodedata.normalize("NFKC", s),
}


def normalize(text: str, names: list[str]) -> str:
    """Apply the normalisers ``names`` in order (``punctuation`` also drops ``.`` and ``-``,
    so put ``number`` before it when answers are numbers)."""
    for name in names:
        text = NORMALIZERS[name](text)
    return text
