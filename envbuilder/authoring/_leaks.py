"""The gold-leak audit: does anything an agent sees hold the answer it is graded against?

For a sample of each split's tasks, the grading target is looked for in everything a client
or an agent can read before its episode ends: every public field of the task (``/task``,
``/task_range``, ``/tasks``; ``id`` included), the rendered prompt, and the output of each
template tool that needs no input (a hint).

- The prompt leaks when it holds its own task's target clearly more often than by chance: on
  at least two rows and :data:`MIN_SHARE` of the sampled rows, and over three times as often as
  it would hold a target dealt at random from the sample (a prompt listing the options
  ``A``-``D``, asking for "a digit 0-9", or a word problem naming its answer in passing holds
  other tasks' targets about as often, and does not leak).
- Any other place leaks when it *equals* the target more often than chance (as above, with
  :data:`MIN_PLACE_SHARE`: a `label` column that is the answer; not a `level` 1-5 that equals
  an answer 3 now and then), or when it *tells* the target on at least two rows and
  :data:`MIN_PLACE_SHARE` of them: holds a target of two characters or digits or more that
  the prompt does not hold (a field the prompt shows, or a hint repeating a number of the
  question, tells nothing new; a lone digit inside a text is no evidence).

Numbers are compared as numbers (``1,000`` holds ``1000``;
``1972`` does not hold ``72``, nor a file name's counter ``0003`` the answer ``3``), other
targets as text, case and spaces ignored.

Duplicate task ids are found here too: two tasks with one id cannot be told apart by a trainer.
"""

from __future__ import annotations

import asyncio
import functools
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envbuilder.environment import Environment
from envbuilder.errors import EnvbuilderError
from envbuilder.graders._normalize import canonical_number
from envbuilder.tools import ToolCall
from envbuilder.tools._template import TemplateTool

__all__ = ["DuplicateIds", "Leak", "answer_matcher", "duplicate_ids", "gold_leaks", "leaking_fields"]

#: Rows per split sampled for leaks.
LEAK_SAMPLE = 200
#: The least share of sampled rows whose prompt holds its own target for it to leak.
MIN_SHARE = 0.03
#: The least share of sampled rows on which another place tells the target the prompt does not.
MIN_PLACE_SHARE = 0.01
#: Rows per split whose ids are checked for duplicates (a bound on the work for huge datasets).
ID_SCAN_LIMIT = 200_000
PROMPT = ("the prompt", ("prompt",))
_NUMBER = re.compile(r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


@dataclass
class Leak:
    """A place an agent can read that holds the gold answer."""

    split: str
    place: str
    """``field 'solution'``, ``task.id``, ``the prompt`` or ``tool 'hint'``."""
    loc: tuple[str | int, ...]
    """Where in the spec to fix it."""
    rows: list[int] = field(default_factory=list)
    """The sampled rows whose place holds their target."""
    sampled: int = 0
    baseline: float = 0.0
    """The share of rows whose place holds the next task's target (chance)."""
    equal: bool = False
    """Whether the place *is* the target on some rows (not only holds it)."""

    def describe(self) -> str:
        verb = "equals" if self.equal else "contains"
        shown = ", ".join(str(r) for r in self.rows[:5]) + (" …" if len(self.rows) > 5 else "")
        return (
            f"{self.place} {verb} the gold answer on {len(self.rows)} of {self.sampled} sampled "
            f"{self.split} tasks (rows {shown}; another task's answer: {self.baseline:.0%})"
        )


@dataclass
class DuplicateIds:
    split: str
    ids: dict[str, list[int]]
    """Each repeated id (up to ten) and its rows (up to five)."""
    count: int
    """How many ids repeat."""
    scanned: int


def _key(text: str) -> str:
    return "".join(text.lower().split())


@functools.lru_cache(maxsize=4096)
def _numbers(text: str) -> frozenset[str]:
    found = set()
    for m in _NUMBER.findall(text):
        if re.match(r"[-+−]?0\d", m):
            continue  # a zero-padded counter (`digit_0003.png`), not a quantity
        number = canonical_number(m)
        if number is not None:
            found.add(number)
    return frozenset(found)


class _Matcher:
    """Whether a text equals or holds a target (numbers as numbers, the rest as text)."""

    def __init__(self, target: str):
        self.number = canonical_number(target)
        self.key = _key(target)
        digits = sum(ch.isdigit() for ch in self.number or "")
        self.informative = digits >= 2 if self.number is not None else len(self.key) >= 2
        """Whether finding it inside a text is evidence: not a lone digit or letter."""

    def holds(self, text: str) -> bool:
        if not self.key:
            return False
        if self.number is not None:
            return self.number in _numbers(text)
        return self.key in _key(text)

    def equals(self, text: str) -> bool:
        if self.number is not None:
            return canonical_number(text) == self.number
        return _key(text) == self.key


def answer_matcher(target: str) -> _Matcher:
    """What tells whether a text equals or holds ``target`` (see the module docstring)."""
    return _Matcher(target)


def _texts(value: Any) -> list[str]:
    """The text in a field or a message (bytes and images skipped)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, bool | int | float):
        return [str(value)]
    if isinstance(value, dict):
        return [t for k, v in value.items() if k not in ("bytes", "data", "image") for t in _texts(v)]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _texts(v)]
    return []


def _field_place(name: str) -> tuple[str, tuple[str | int, ...]]:
    return ("task.id" if name == "id" else f"field {name!r}", ("task",))


def _places(env: Environment, task: dict[str, Any]) -> dict[tuple[str, tuple[str | int, ...]], str]:
    """Each place an agent can read for ``task``, with its text."""
    places: dict[tuple[str, tuple[str | int, ...]], str] = {}
    for name, value in env.public(task).items():
        places[_field_place(name)] = "\n".join(_texts(value))
    if env.prompter is not None:
        try:
            messages = [m.model_dump() for m in env.messages(task)]
        except EnvbuilderError:
            messages = []
        places[PROMPT] = "\n".join(_texts(messages))
    for i, declared in enumerate(env.toolbox.declared.values()):
        tool = declared.tool
        if isinstance(tool, TemplateTool) and not (tool.config.input or {}):
            try:
                reply = asyncio.run(tool.run(ToolCall(task=task, args={}, state={})))
            except EnvbuilderError:
                continue
            places[(f"tool {tool.name!r}", ("tools", i))] = "\n".join(
                _texts([b.model_dump() for b in reply.blocks])
            )
    return places


def gold_leaks(env: Environment, sample: int = LEAK_SAMPLE, seed: int = 0) -> list[Leak]:
    """Every place of every split that leaks the gold answer (see the module docstring)."""
    submit = env.submit
    if submit is None or submit.dialogue is not None:
        return []  # a dialogue's replies have no single target
    rng = random.Random(seed)
    leaks: list[Leak] = []
    for name, view in env.splits.items():
        n = len(view)
        rows: list[tuple[int, _Matcher, dict[tuple[str, tuple[str | int, ...]], str]]] = []
        for index in sorted(rng.sample(range(n), min(sample, n))):
            try:
                task = view.task(index)
                target = submit.grader.target(task)
            except EnvbuilderError:
                continue
            if target is None or not str(target).strip():
                continue
            rows.append((index, _Matcher(str(target)), _places(env, task)))
        leaks += _split_leaks(name, rows)
    return leaks


def leaking_fields(tasks: list[dict[str, Any]], targets: list[Any], prompts: list[Any]) -> list[str]:
    """The fields of ``tasks`` (public fields, ``id`` the task id) that the audit would report
    as giving their task's target away, each task's prompt holding ``prompts``: the rule of
    :func:`gold_leaks`, for tasks not yet served (what `envbuilder init` must make private)."""
    rows = []
    for index, (task, target, prompt) in enumerate(zip(tasks, targets, prompts, strict=True)):
        if target is None or not str(target).strip():
            continue
        places = {_field_place(name): "\n".join(_texts(value)) for name, value in task.items()}
        places[PROMPT] = "\n".join(_texts(prompt))
        rows.append((index, _Matcher(str(target)), places))
    names = {_field_place(name)[0]: name for task in tasks for name in task}
    return [names[leak.place] for leak in _split_leaks("", rows) if leak.place in names]


def _split_leaks(
    split: str, rows: list[tuple[int, _Matcher, dict[tuple[str, tuple[str | int, ...]], str]]]
) -> list[Leak]:
    n = len(rows)
    # Each distinct target once, with how many sampled rows have it: chance is how many rows'
    # targets a place would hold (or equal) if targets were dealt at random.
    targets: dict[str, tuple[_Matcher, int]] = {}
    for _, matcher, _ in rows:
        known = targets.get(matcher.key)
        targets[matcher.key] = (matcher, known[1] + 1 if known else 1)
    others = max(1, n - 1)
    found: dict[tuple[str, tuple[str | int, ...]], Leak] = {}
    equal_rows: dict[tuple[str, tuple[str | int, ...]], list[int]] = {}
    chance: dict[tuple[str, tuple[str | int, ...]], float] = {}
    for index, matcher, places in rows:
        prompt = places.get(PROMPT, "")
        for where, text in places.items():
            leak = found.setdefault(where, Leak(split, where[0], where[1], sampled=n))
            by_chance = _Matcher.holds if where == PROMPT else _Matcher.equals
            if where != PROMPT:
                if matcher.equals(text):
                    equal_rows.setdefault(where, []).append(index)
                # Beside the prompt, a place tells an answer the prompt does not already hold;
                # a lone digit or letter in a text is no evidence (it is everywhere).
                if matcher.informative and matcher.holds(text) and not matcher.holds(prompt):
                    leak.rows.append(index)
            if where == PROMPT and matcher.holds(text):
                leak.rows.append(index)
            held = sum(
                count - (key == matcher.key)
                for key, (other, count) in targets.items()
                if by_chance(other, text)
            )
            chance[where] = chance.get(where, 0.0) + held / others
    leaks = []
    for where, leak in found.items():
        leak.baseline = chance.get(where, 0.0) / max(1, n)
        equal = equal_rows.get(where, [])
        if where == PROMPT:
            # A prompt names numbers of its own: only more often than chance is a leak.
            leaking = _beats_chance(len(leak.rows), n, leak.baseline, MIN_SHARE)
        elif _beats_chance(len(equal), n, leak.baseline, MIN_PLACE_SHARE):
            leak.rows, leak.equal, leaking = sorted(set(equal) | set(leak.rows)), True, True
        else:
            leaking = len(leak.rows) >= min(2, n) and len(leak.rows) / max(1, n) >= MIN_PLACE_SHARE
        if leaking:
            leaks.append(leak)
    return leaks


def _beats_chance(hits: int, n: int, baseline: float, least: float) -> bool:
    share = hits / max(1, n)
    return hits >= min(2, n) and share >= least and share > 3 * baseline


def duplicate_ids(
    env: Environment, limit: int = ID_SCAN_LIMIT, progress: Callable[[], None] | None = None
) -> list[DuplicateIds]:
    """The splits whose first ``limit`` tasks repeat an id (with ``task: {id: column}``)."""
    found = []
    for name, view in env.splits.items():
        if view.shaper.id_column is None:
            continue  # `<split>-<row>` ids are unique by construction
        seen: dict[str, list[int]] = {}
        scanned = 0
        for batch in view.iter_batches():
            for task in batch:
                seen.setdefault(str(task.get("id")), []).append(scanned)
                scanned += 1
            if scanned >= limit:
                break
        repeated = {k: v for k, v in seen.items() if len(v) > 1}
        if repeated:
            shown = {k: v[:5] for k, v in list(repeated.items())[:10]}
            found.append(DuplicateIds(name, shown, len(repeated), scanned))
        if progress is not None:
            progress()
    return found
