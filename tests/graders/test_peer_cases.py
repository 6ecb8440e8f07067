"""The ``math`` grader on other graders' own test tables (gold, answer, verdict).

The cases are every ``@pytest.mark.parametrize`` row with ``gold``, ``pred`` and ``expected`` in
huggingface/Math-Verify ``tests/*.py`` and huggingface/lighteval
``tests/unit/metrics/test_extractive_match.py``, collected by ``bench/peer_cases.py`` into
``peers/math_verify.json`` and ``peers/lighteval.json`` (each file records the repository and
commit; each case its path and line). Both are MIT-licensed (Copyright 2024 The HuggingFace
Team). Letter-choice tables (``test_extraction_abc``) belong to the ``choice`` grader and are
left out. A row that asks the peer for a non-default precision is graded with that
``float_rounding``.

Every case agrees with the peer except those in ``peers/conventions.json``: conventions we
chose (named in docs/how-to/graders.md) and known failures, each of which must still differ (so the list
cannot go stale).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envbuilder.graders import Grader
from tests.graders._util import grade, make

pytest.importorskip("math_verify")

PEERS = Path(__file__).parent / "peers"
LISTED = json.loads((PEERS / "conventions.json").read_text(encoding="utf-8"))
EXCEPTIONS: dict[str, str] = {**LISTED["conventions"], **LISTED["known_failures"]}
_GRADERS: dict[int, Grader] = {}


def _grader(places: int) -> Grader:
    if places not in _GRADERS:
        _GRADERS[places] = make({"type": "math", "target": "{{ answer }}", "float_rounding": places})
    return _GRADERS[places]


def _cases(name: str) -> list[tuple[str, dict[str, Any]]]:
    """(repo:path:line, case); the second case of a line gets ``#2``, and so on."""
    data = json.loads((PEERS / f"{name}.json").read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    cases = []
    for c in data["cases"]:
        key = f"{data['repo']}:{c['path']}:{c['line']}"
        seen[key] = seen.get(key, 0) + 1
        if "abc" not in c["test"]:
            cases.append((key if seen[key] == 1 else f"{key}#{seen[key]}", c))
    return cases


@pytest.mark.parametrize("peer", ["math_verify", "lighteval"])
async def test_peer_tables(peer: str) -> None:
    agree, differ = [], []
    for key, case in _cases(peer):
        result = await grade(
            _grader(case["options"].get("precision", 6)), case["answer"], {"answer": case["gold"]}
        )
        ours = result.score == 1.0
        (agree if ours == bool(case["expected"]) else differ).append(key)
    unexplained = [k for k in differ if k not in EXCEPTIONS]
    assert not unexplained, unexplained
    stale = [k for k in agree if k in EXCEPTIONS]
    assert not stale, f"these now agree with the peer: drop them from conventions.json: {stale}"
    factual = len(agree) + len([k for k in differ if k in LISTED["known_failures"]])
    assert len(agree) / factual >= 0.99, (len(agree), factual)


def test_no_false_positive_among_the_peers_wrong_answers() -> None:
    """Every answer a peer rejects that we accept is a listed convention, never a known failure."""
    wrong = [k for name in ("math_verify", "lighteval") for k, c in _cases(name) if not c["expected"]]
    assert not [k for k in wrong if k in LISTED["known_failures"]]
