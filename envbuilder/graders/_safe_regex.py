"""Regular expressions over untrusted answers, bounded in time and input size.

Patterns come from spec authors and answers from agents, so either side can be hostile
(``(a|aa)+$`` on ``"a" * 50 + "!"`` backtracks for hours under :mod:`re`). The ``regex``
package takes a ``timeout=`` per call and speaks Python's ``re`` syntax (backreferences,
lookarounds) which a linear-time engine like RE2 refuses; so every grader pattern runs here.

Matches pass ``concurrent=True`` (the GIL is released while the engine runs) and graders call
them through :func:`envbuilder.deadlines.offload`, so a slow match never holds the event loop.
The engine's own timeout is only checked now and then (``timeout=5`` stops after 15-20 s), so
a grader with a longer budget tries a short match first and, past it, runs
:func:`first_match` in a grading process that is killed at the budget (``envbuilder.isolation.processes``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import regex

from envbuilder.isolation.processes import worker_function

FLAGS = {
    "ignorecase": regex.IGNORECASE,
    "multiline": regex.MULTILINE,
    "dotall": regex.DOTALL,
    "verbose": regex.VERBOSE,
    "ascii": regex.ASCII,
}

DEFAULT_TIMEOUT = 0.05
"""Seconds one match may take; ordinary patterns finish in microseconds."""


class PatternTimeout(Exception):
    """A match ran out of time (the pattern backtracks catastrophically on this answer)."""


def compile_pattern(pattern: str, flags: Iterable[str] = ()) -> regex.Pattern[str]:
    """Compile with ``re``-compatible semantics (``VERSION0``); ValueError with the reason."""
    bits = regex.VERSION0
    for name in flags:
        bits |= FLAGS[name]
    try:
        return regex.compile(pattern, bits)
    except regex.error as exc:
        raise ValueError(f"invalid regular expression: {exc}") from None


def check_pattern(pattern: str) -> str:
    """A pydantic validator body: ``pattern`` unchanged, or ValueError saying why it is invalid."""
    compile_pattern(pattern)
    return pattern


@contextlib.contextmanager
def _bounded(pattern: regex.Pattern[str]) -> Iterator[None]:
    """The engine's ``TimeoutError`` as :class:`PatternTimeout`, naming the pattern."""
    try:
        yield
    except TimeoutError:
        raise PatternTimeout(pattern.pattern) from None


def search(
    pattern: regex.Pattern[str], text: str, timeout: float = DEFAULT_TIMEOUT
) -> regex.Match[str] | None:
    with _bounded(pattern):
        return pattern.search(text, timeout=timeout, concurrent=True)


def fullmatch(
    pattern: regex.Pattern[str], text: str, timeout: float = DEFAULT_TIMEOUT
) -> regex.Match[str] | None:
    with _bounded(pattern):
        return pattern.fullmatch(text, timeout=timeout, concurrent=True)


def find_all(pattern: regex.Pattern[str], text: str, *, timeout: float = DEFAULT_TIMEOUT) -> list[Any]:
    """Every match of ``pattern`` in ``text``; the time bound covers the whole scan."""
    with _bounded(pattern):
        return list(pattern.finditer(text, timeout=timeout, concurrent=True))


@worker_function
def first_match(pattern: str, flags: int, text: str, full: bool) -> str | None:
    """The text ``pattern`` matches in ``text`` (None when it does not), with no time limit of
    its own: run in a grading process, which is killed at its deadline."""
    compiled = regex.compile(pattern, flags)
    found = compiled.fullmatch(text) if full else compiled.search(text)
    return None if found is None else found.group(0)
