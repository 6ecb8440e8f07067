"""Where a response states its final answer: the one rule every text grader reads answers by.

:func:`final_statement` finds the last *stated* answer: a ``\\boxed{}`` (braces balanced), an
``<answer>…</answer>`` tag, or an answer phrase ("The final answer is", "Answer:", GSM8K's
``####``, and the same in other languages) followed by a value, whichever comes last in the
text, on one line or many. Earlier statements are drafts: "The answer is 42. Wait, I made an
error. The answer is 41." answers 41; a phrase after the last box overrides it only with a
number or LaTeX in its value ("\\boxed{5}. The answer is correct." answers 5).

Several values offered at once are a hedge, kept together as one list so that a single-valued
gold never equals it: boxes (or math spans) parted only by separators (``\\boxed{3} or
\\boxed{4}``, ``$3$ or maybe $4$``, over line breaks too), a phrase whose value continues with
"or" on its line or the next ("The answer is 3\\nor 4"), and a statement offered as an
alternative to the one before it ("Alternatively, the answer is 4", "The answer could also be
4", "or perhaps \\boxed{4}", "It could also be 4" after it), and a last sentence that ends on
two numbers ("It is either 3 or 4."). The same separators make a set or a tuple of one answer
(``\\boxed{1}, \\boxed{2}``; ``\\boxed{1} papers and \\boxed{2} bins``).

:func:`answer_span` is what the ``math`` grader reads (the target the same way): the final
statement's value, else the last ``$…$``/``\\(…\\)``/``\\[…\\]`` run (or a concluding sentence
after it that states one number: "Therefore, there are 12 sequences."), else the whole text.
``exact_match`` (``extract: number``) takes the first number of the final statement's text.

Every pattern here runs in linear time on hostile input (each body stops at the next opening
delimiter; a statement is read from a bounded window; phrases are tried at their key words only,
at most 200 of them), and the common answers cost microseconds (see ``_phrases``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*")
_BOXED_WORD = re.compile(r"[^\s$]+")
# "The final answer is", "Answer:", and the same in other languages (the answer phrases of
# lm-evaluation-harness, lighteval and Minerva, Spanish, French, German, Portuguese, Italian,
# Chinese, Japanese, Russian, Arabic).
PHRASE = (
    r"(?:final\s+answers?|the\s+answers?|answers?|respuesta\s+final|la\s+respuesta|respuesta|"
    r"r[ée]ponse\s+finale|la\s+r[ée]ponse|r[ée]ponse|die\s+antwort|antwort|endergebnis|"
    r"a\s+resposta|resposta|la\s+risposta|risposta|最终答案|答案|答え|ответ|الإجابة|الجواب)"
)
# "is", and "could (also) be", "is also": an answer offered as an alternative says so here.
COPULA = (
    r"(?:(?:could|might|may|would|can)\s+(?:also\s+)?be\b|is(?:\s+also)?\b|are\b|es\b|est\b|ist\b|é\b|è\b|"
    r"是|为|為|は|:|：|=|هي|هو)"
)
# The words every phrase of PHRASE contains, lowercased (and GSM8K's marker).
_KEY_WORDS = (
    "answer", "####", "respuesta", "réponse", "reponse", "antwort", "endergebnis", "resposta",
    "risposta", "答案", "答え", "ответ", "الإجابة", "الجواب",
)  # fmt: skip
_ASCII_KEY_WORDS = tuple(word for word in _KEY_WORDS if word.isascii())
# A phrase and its copula, or GSM8K's `####`; the value follows.
_STATED = re.compile(
    rf"(?:{PHRASE}\s*(?:\*\*)?\s*{COPULA}\s*(?:[:：=]\s*)?(?:\*\*)?|####)[ \t]*", re.IGNORECASE
)
# A statement's value is read from at most this many characters after its phrase.
_STATEMENT_CHARS = 2000
# What introduces a statement as an alternative to the one before it (a hedge, not a correction).
_ALTERNATIVE = re.compile(
    r"\balternatively\b|\bor\s+(?:maybe|perhaps|possibly|probably)\b|\banother\s+(?:possible\s+)?"
    r"(?:answer|solution|value)\b|\b(?:could|might|may)\s+also\s+be\b|\bis\s+also\b|\botherwise\b",
    re.IGNORECASE,
)

# Words without which neither _ALTERNATIVE nor _LATER_ALTERNATIVE can match (a cheap test first).
_HINTS = ("also", "alternativ", "another", "maybe", "perhaps", "possibl", "probabl", "otherwise")
# After the final statement, a value offered as another answer ("It could also be 42.").
_LATER_ALTERNATIVE = re.compile(
    r"\b(?:(?:could|might|may)\s+also\s+be|alternatively,?\s+(?:it|the\s+(?:final\s+)?answer|the\s+result)\s+"
    r"(?:is|could\s+be|might\s+be|may\s+be)|another\s+possible\s+(?:answer|value)\s+is)\s+(?P<rest>[^\n]{1,200})",
    re.IGNORECASE,
)
# Two different numbers offered as the answer in a sentence: "It is either 41 or 42", "41 (or
# 42)", "x = 5 or x = -5".
OR_PAIR = re.compile(
    r"(?<![\w.])(?P<a>[-+−]?\d[\d,]*(?:\.\d+)?)\s*,?\s*\(?\s*(?:\\text\s*\{\s*)?(?:or|oder|ou)\b(?:\s*\})?\s*"
    r"(?:maybe\s+|perhaps\s+|possibly\s+|probably\s+)?\$?(?:[A-Za-z]\s*=\s*)?"
    r"(?P<b>[-+−]?\d[\d,]*(?:\.\d+)?)(?!\w|[.,]\d)",
    re.IGNORECASE,
)
# The R1 chat format's answer; each body stops at the next opening tag (linear time).
_ANSWER_TAG = re.compile(r"<answer>((?:(?!<answer>).){0,5000}?)</answer>", re.DOTALL | re.IGNORECASE)
# Inside a stated answer written as a sentence ("The largest $n$ is 34."), the value follows its
# last verb of being.
_SENTENCE_COPULA = re.compile(r"\s(?:is|are|was|equals|es|est|ist|é|è)\s+|=|是|为|為", re.IGNORECASE)
# The first value in prose: a LaTeX command with its braces, or a number (with a fraction).
_FIRST_VALUE = re.compile(r"\\[A-Za-z]+(?:\s*\{[^{}]*\})+|[-+−]?\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?")
# A sentence ends at a full stop followed by a space and not a digit ("12,000,023. I hope…"),
# or at an ideographic full stop.
_SENTENCE_END = re.compile(r"\.\s+(?=\D)|。")
# "or maybe 4": the adverb belongs to the hedge, not to prose after the value.
_HEDGE_ADVERB = re.compile(r"\b(or|oder|ou)\s+(?:maybe|perhaps|possibly|probably)\b", re.IGNORECASE)
# A value's statement continues on the next line when that line (or the end of this one) joins them.
_JOINS_NEXT = re.compile(
    r"^(?:(?:or|oder|ou)\b|(?:and|und|et|[,;])\s*(?=[-+−\d$\\(\[])|\\text\s*\{\s*(?:or|and)\s*\})",
    re.IGNORECASE,
)
_OPEN_END = re.compile(r"(?:\b(?:or|and|oder|und|ou|et)|,)\s*$", re.IGNORECASE)
# What follows "the answer is" without being an answer ("The answer is correct.").
_NOT_VALUES = frozenset(
    {"correct", "right", "wrong", "incorrect", "clear", "obvious", "simple", "straightforward"}
    | {"below", "above", "following", "unclear", "unknown", "this", "that", "here", "as", "not"}
)
# After a stated value's sentence: "Or 4." is still the hedge.
_OR_NEXT = re.compile(r"\s*(?:or|oder|ou)\s+(?P<v>\S.*)", re.IGNORECASE | re.DOTALL)
# What may stand between boxes (or math spans) that together state one answer: "\boxed{1},
# \boxed{2}", "\boxed{k = 45} \quad \text{and} \quad \boxed{n = 2}", "or maybe", and the name the
# next value is given ("y_1 = \boxed{…} and y_2 = \boxed{…}").
_SEPARATOR = re.compile(
    r"\\(?:text|mbox|textbf|mathrm)\s*\{[^{}]{0,40}\}|\\q?quad(?![A-Za-z])|\\[,;:!]|\\[()\[\]]|"
    r"(?<![A-Za-z\\])[A-Za-z](?:_\{?\w{1,3}\}?)?\s*=(?!=)|"
    r"\$|[\s,;.]|\b(?:and|or|und|oder|et|ou|y|o|e|maybe|perhaps|possibly|probably)\b|和|或|、",
    re.IGNORECASE,
)
# Between two boxes, one word naming the first value and a conjunction: "\boxed{1} papers and
# \boxed{2} bins" is one answer (1, 2). Words that argue ("wrong", "wait") part two answers.
_NAMED_GAP = re.compile(r"\s*(?P<word>[A-Za-z]{2,20})\s*(?:,\s*(?:and|or)?|;|and|or)\s*", re.IGNORECASE)
_ARGUING = frozenset(
    {"wrong", "incorrect", "not", "no", "but", "then", "so", "thus", "hence", "therefore", "actually"}
    | {"wait", "correction", "instead"}
)
# A LaTeX command written with its backslash doubled, as in a JSON-escaped answer (`\\frac`);
# not a row break followed by a command (`0\\\end{pmatrix}`: three backslashes).
_DOUBLED = re.compile(
    r"(?<!\\)\\\\(?=(?:left|right|[dtc]?frac|sqrt|pi|boxed|text|mathrm|mathbf|leq?|geq?|neq?|infty|"
    r"cdot|times|circ|in|cup|cap|pm|begin|end|quad|qquad|dots|ldots|cdots|theta|alpha|beta|bmod|"
    r"pmod|mod|equiv)(?![A-Za-z]))"
)
# After a stated answer, a word of four letters or more outside braces starts the prose
# ("5 because 5 > 3"); a units word cut off with it changes nothing.
_PROSE_WORD = re.compile(r"\s(?=\(?[A-Za-z]{4,}\b)")
# Each body stops at the next opening delimiter, so a text full of unclosed ones costs linear time.
_MATH = re.compile(
    r"(?<!\\)\$\$(?P<d>(?:[^$]|\$(?!\$))+?)(?<!\\)\$\$|(?<![\\$])\$(?P<i>(?:[^$\\]|\\.)+?)(?<!\\)\$"
    r"|\\\[(?P<b>(?:(?!\\\[).)+?)\\\]|\\\((?P<p>(?:(?!\\\().)+?)\\\)",
    re.DOTALL,
)
# A concluding sentence after the last math span: "Therefore, there are 12 distinct sequences."
_CONCLUSION = re.compile(
    r"(?:^|(?<=[.!?])\s+|\n)\s*(?:therefore|thus|hence|so|in\s+total|in\s+conclusion|overall|finally)\b"
    r"[^.!?\n$\\]{0,300}",
    re.IGNORECASE,
)
_SENTENCE_BREAK = re.compile(r"[.!?。\n]\s")
_LAST_SENTENCE = re.compile(r"(?<=[.!?。])\s+(?=\S)|\n")
_PROSE_NUMBER = re.compile(r"(?<![\w.,])[-−]?\d+(?:,\d{3})*(?:\.\d+)?%?(?![\w%]|[.,]\d)")
_QUOTES = "\"'“”‘’`"
_WORDS = re.compile(r"[^\W\d_]{2,}\s+[^\W\d_]{2,}")
_COMMANDS_AND_SPANS = re.compile(r"\\[A-Za-z]+|\$[^$]*\$")
_VALUE_SIGN = re.compile(r"\d|\\[A-Za-z]")
_PLAIN_VALUE = re.compile(r"([-+]?\d[\d,]*(?:\.\d+)?)\.?")
_OPENS_WITH_VALUE = re.compile(r"[-+−(\[{\\\d]")
_IDEOGRAPHS = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


@dataclass(slots=True)
class Statement:
    """A stated final answer."""

    kind: str
    """``boxed``, ``tagged`` (``<answer>…</answer>``) or ``stated`` (an answer phrase or ``####``)."""
    start: int
    """Where it starts in the text (its first box, or its phrase)."""
    value: str
    """The value as the ``math`` grader reads it (boxes of one run joined with ``, ``)."""
    text: str
    """The text the value was read from: the boxes' contents, or the phrase's sentence."""
    parts: tuple[str, ...] = ()
    """The values it joins: each box of its run, or the phrase's one value."""
    alternatives: tuple[str, ...] = ()
    """The parts of the statement it was offered as an alternative to (a hedge)."""
    phrase: str = ""
    """The answer phrase that introduced it ("The answer could also be")."""
    end: int = 0
    """Where its phrase (or its last box) ends."""


def undouble(text: str) -> str:
    """``text`` with LaTeX commands written with a doubled backslash (``\\\\frac``) undoubled."""
    return _DOUBLED.sub(r"\\", text) if "\\\\" in text else text


@functools.lru_cache(maxsize=32)
def final_statement(text: str) -> Statement | None:
    """The last stated answer in ``text`` (see the module docstring); None when there is none.
    (Cached: a grade asks for the answer and then for a hedge in it.)"""
    return _final(undouble(text), hedges=True)


def _final(text: str, *, hedges: bool) -> Statement | None:
    found = boxes(text) if "\\" in text else []
    box = None
    if found:
        first = _run_start(text, found)
        contents = _contents(found[first:])
        value = ", ".join(contents) if contents else found[-1][2].strip()
        box = Statement("boxed", found[first][0], value, value, tuple(contents) or (value,), end=found[-1][1])
    tag = _last_tag(text) if "</answer>" in text else None
    if tag is not None and (box is None or tag.end >= box.end):
        box = tag  # `<answer>\boxed{100}</answer>`: the tag holds the box
    after = box.end if box is not None else 0
    stated = _last_phrase(text, after)
    final = stated if stated is not None else box
    if final is None or not hedges:
        return final
    return _with_alternatives(text, final)


def _last_tag(text: str) -> Statement | None:
    """The last ``<answer>…</answer>`` (the R1 chat format's answer), read as its content's own
    final answer (a box inside it, or the content)."""
    tags = list(_ANSWER_TAG.finditer(text))
    if not tags:
        return None
    m = tags[-1]
    content = m.group(1).strip()
    inner = _final(content, hedges=False)
    value = inner.value if inner is not None else _strip_delimiters(content)
    if not value:
        return None
    parts = inner.parts if inner is not None else (value,)
    return Statement("tagged", m.start(), value, content, parts, end=m.end())


def _phrases(text: str, after: int) -> Iterator[re.Match[str]]:
    """The answer phrases of ``text`` at or after ``after``, the last first (at most 20, among
    the last 200 key words: a text of phrases without values costs a bounded time).

    The phrase pattern is tried only at its key words ("answer", "####", "réponse"…), found by
    ``str.find`` on the lowercased text; a match there ends where the whole phrase ("The final
    answer is") ends. Scanning the pattern's many alternatives at every position costs ~0.4 ms
    on a 500-character GSM8K solution, this a few microseconds."""
    low = text.lower()
    if len(low) != len(text):  # a character whose lower case is longer: scan the slow, sure way
        yield from reversed(list(_STATED.finditer(text, after))[-20:])
        return
    anchors = []
    for word in _KEY_WORDS if not low.isascii() else _ASCII_KEY_WORDS:
        if word in low:
            i = low.find(word, after)
            while i >= 0:
                anchors.append(i)
                i = low.find(word, i + 1)
    found = 0
    # The last 200 key words at most: "answer answer answer…" costs a bounded time.
    for anchor in sorted(anchors, reverse=True)[:200]:
        m = _STATED.match(text, anchor, anchor + 80)
        if m is not None:
            yield m
            found += 1
            if found == 20:
                return


def _last_phrase(text: str, after: int) -> Statement | None:
    """The last answer phrase at or after ``after`` that is followed by a value."""
    for m in _phrases(text, after):
        rest = text[m.end() : m.end() + _STATEMENT_CHARS]
        value = _stated_value(rest)
        if _has_value(value) or (
            value and not after and not is_prose(value) and value.lower() not in _NOT_VALUES
        ):
            # After a box, only a phrase with a number or LaTeX overrides it.
            parts = tuple(value.split(", "))  # "3, 4": the values of a hedge joined by _stated_value
            return Statement(
                "stated", m.start(), value, _statement_text(rest), parts, phrase=m.group(), end=m.end()
            )
    return None


def _hinted(low: str) -> bool:
    return any(word in low for word in _HINTS)


def _with_alternatives(text: str, final: Statement) -> Statement:
    """``final`` joined with the statement before it when it is offered as an alternative, and
    with a value offered after it as one ("It could also be 42")."""
    after = text[final.end : final.end + _STATEMENT_CHARS].lower()
    later = (
        _LATER_ALTERNATIVE.search(text, final.end, final.end + _STATEMENT_CHARS) if _hinted(after) else None
    )
    if later is not None:
        other = _stated_value(later.group("rest"), alternatives=False)
        if _has_value(other) and _key(other) != _key(final.value):
            return replace(final, value=f"{final.value}, {other}", parts=(*final.parts, other))
    window = text[max(0, final.start - 200) : final.start]
    if not (_hinted(window.lower()) or _hinted(final.phrase.lower())):
        return final
    sentence = _SENTENCE_BREAK.split(window)[-1]
    if not (_ALTERNATIVE.search(sentence) or _ALTERNATIVE.search(final.phrase)):
        return final
    before = _final(text[: final.start], hedges=False)
    if before is None or _key(before.value) == _key(final.value):
        return final
    value = f"{before.value}, {final.value}"
    return replace(final, value=value, alternatives=before.parts)


def _key(value: str) -> str:
    return "".join(value.split()).lower()


def answer_span(text: str) -> tuple[str, str]:
    """(the final answer in ``text``, where it was found: ``boxed``, ``tagged``, ``stated``,
    ``hedged`` (a last sentence offering two numbers), ``math``, ``concluded`` or ``whole``);
    see the module docstring."""
    text = undouble(text)
    final = _final(text, hedges=True)
    if final is not None:
        return final.value, final.kind
    hedge = prose_alternatives(text)
    if hedge:
        return ", ".join(hedge), "hedged"
    math = [(m.start(), m.end(), _math_content(m)) for m in _MATH.finditer(text)]
    if math:
        concluded = _concluded(text[math[-1][1] :])
        if concluded is not None:
            return concluded, "concluded"
        return run_of(text, math), "math"
    return _strip_delimiters(text), "whole"


def prose_alternatives(text: str) -> tuple[str, ...]:
    """The different numbers the last sentence of ``text`` ends by offering as alternatives
    ("It is either 41 or 42."); empty when it offers none."""
    tail = text[-400:].rstrip()
    if "o" not in tail.lower():  # no "or", "oder", "ou": no alternatives (most answers)
        return ()
    sentence = _LAST_SENTENCE.split(tail.rstrip(".!?。 "))[-1]
    pairs = list(OR_PAIR.finditer(sentence))
    if not pairs or re.search(r"\d", sentence[pairs[-1].end() :]):
        return ()  # the pair must be the sentence's last numbers: "3 or 4 apples, 9 in all" is not one
    pair = pairs[-1]
    values = tuple(dict.fromkeys(v.replace(",", "") for v in (pair.group("a"), pair.group("b"))))
    return values if len(values) > 1 else ()


def _concluded(tail: str) -> str | None:
    """The one number stated by the last concluding sentence of ``tail`` ("Therefore, there are
    12 distinct sequences that meet the three conditions." → 12), if any."""
    for m in reversed(list(_CONCLUSION.finditer(tail[-5000:]))):
        numbers = set(_PROSE_NUMBER.findall(m.group()))
        if len(numbers) == 1:
            return numbers.pop()
        if numbers:
            return None
    return None


def brace_pairs(text: str) -> dict[int, int]:
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
            pairs = brace_pairs(text) if pairs is None else pairs
            if end in pairs:
                found.append((m.start(), pairs[end] + 1, text[end + 1 : pairs[end]]))
        elif m.group().endswith((" ", "\t")):
            word = _BOXED_WORD.match(text, end)
            if word:
                found.append((m.start(), word.end(), word.group()))
    return found


def _joins(gap: str) -> bool:
    """Whether ``gap``, the text between two boxes or spans, makes them parts of one answer."""
    if not _SEPARATOR.sub("", gap).strip():
        return True
    named = _NAMED_GAP.fullmatch(gap)
    return bool(named and named.group("word").lower() not in _ARGUING)


def _run_start(text: str, items: list[tuple[int, int, str]]) -> int:
    """The index of the first item of the run that ends at the last item."""
    first = len(items) - 1
    while first > 0 and _joins(text[items[first - 1][1] : items[first][0]]):
        first -= 1
    return first


def _contents(items: list[tuple[int, int, str]]) -> list[str]:
    return list(dict.fromkeys(c.strip() for _, _, c in items if c.strip()))


def run_items(text: str, items: list[tuple[int, int, str]]) -> list[str]:
    """The contents of the last item and of the items before it that only separators part
    (``\\boxed{1}, \\boxed{2}``), in order; repeated contents once."""
    return _contents(items[_run_start(text, items) :])


def run_of(text: str, items: list[tuple[int, int, str]]) -> str:
    """:func:`run_items` joined as one answer (``1, 2``)."""
    contents = run_items(text, items)
    return ", ".join(contents) if contents else items[-1][2].strip()


def _forward_run(text: str, items: list[tuple[int, int, str]]) -> str:
    """The contents of the first item and of the items after it that only separators part."""
    last = 0
    while last + 1 < len(items) and _joins(text[items[last][1] : items[last + 1][0]]):
        last += 1
    contents = _contents(items[: last + 1])
    return ", ".join(contents) if contents else items[0][2].strip()


def _strip_delimiters(span: str) -> str:
    span = span.strip()
    for opening, closing in (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$")):
        if span.startswith(opening) and span.endswith(closing) and len(span) >= len(opening) + len(closing):
            return span[len(opening) : len(span) - len(closing)].strip()
    return span


def _statement_text(rest: str) -> str:
    """The line a phrase's value is on, with the lines that continue it ("3\\nor 4")."""
    lines = rest.lstrip().split("\n")
    text = lines[0].strip()
    for line in lines[1:12]:
        line = line.strip()
        if not line:
            continue
        if _JOINS_NEXT.match(line) or _OPEN_END.search(text):
            text = f"{text} {line}"
        else:
            break
    return text


def _stated_value(rest: str, *, alternatives: bool = True) -> str:
    rest = _statement_text(rest)
    plain = _PLAIN_VALUE.fullmatch(rest)
    if plain:  # "72", "1,234.5." (GSM8K's `#### 72`): the value as it is, without the reading below
        return plain.group(1)
    if rest[:1] in _QUOTES or rest.startswith('\\"'):
        rest = rest.lstrip("\\" + _QUOTES)
    rest = _HEDGE_ADVERB.sub(r"\1", rest)
    math = list(_MATH.finditer(rest))
    if math and math[0].start() == 0:
        return _forward_run(rest, [(m.start(), m.end(), _math_content(m)) for m in math])
    parts = _SENTENCE_END.split(rest, maxsplit=1)
    sentence = parts[0].strip().rstrip(_QUOTES).rstrip("\\").strip()
    if is_prose(sentence) and not _OPENS_WITH_VALUE.match(sentence):
        # A sentence that opens with words: "The largest $n$ is 34.", "Jane started growing
        # Sphere 3 hours ago." (one that opens with the value is cut where its prose starts)
        # (an `=` inside a math span is the value's own: `$x-2y+z-1=0$`)
        masked = _MATH.sub(lambda m: " " * len(m.group()), sentence)
        copulas = list(_SENTENCE_COPULA.finditer(masked))
        if copulas:
            return _stated_value(sentence[copulas[-1].end() :], alternatives=alternatives)
        math = list(_MATH.finditer(sentence))
        if math:
            return _math_content(math[0])
        first = _FIRST_VALUE.search(sentence)
        if first:  # "Janeth aura encore 220 $ à payer d'ici 12 mois.": its first value
            return first.group()
    if math:
        return _math_content(math[0])
    # "5, since 3+2=5.": the prose is cut at "since"; the comma before it belongs to the prose.
    value = _strip_delimiters(_cut_prose(sentence).rstrip().rstrip(".,;:").rstrip())
    if alternatives and len(parts) > 1 and value:
        # "The answer is 3. Or 4.": the alternative after the full stop is still the hedge.
        alternative = _OR_NEXT.match(parts[1])
        if alternative:
            other = _stated_value(alternative.group("v"), alternatives=False)
            if other and _key(other) != _key(value):
                return f"{value}, {other}"
    return value


def _has_value(text: str) -> bool:
    return bool(_VALUE_SIGN.search(text))


def is_prose(text: str) -> bool:
    """Two words in a row outside LaTeX commands, or any ideographs: a sentence, not a value."""
    bare = _COMMANDS_AND_SPANS.sub(" ", text)
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
