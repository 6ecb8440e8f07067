"""envbuilder's graders on other graders' own test tables (gold, answer, verdict).

The tables (``peers/*.json``, listed with their licences in ``peers/README.md``) are the test
files of math-verify, lighteval, hendrycks/math, NeMo-Skills, skyrl-gym, verifiers, slime, AReaL,
open-r1, open-instruct and rLLM, transcribed by ``bench/peer_cases.py``; ``peer_tables`` grades
them. For every table and every grader it measures: no false pass and at most 1 % false fails
on its factual cases; every difference is a listed convention, peer error or known failure, and
every listed case still differs (so ``peers/conventions.json`` cannot go stale).
"""

from __future__ import annotations

import pytest

from envbuilder.graders import Grader
from envbuilder.graders._fidelity import card
from tests.graders import peer_tables
from tests.graders.peer_tables import EXCEPTIONS, Tally

pytest.importorskip("math_verify")

PAIRS = [(name, grader) for grader in peer_tables.CONFIGS for name, _ in peer_tables.measured(grader)]
_GRADERS: dict[tuple[str, int], Grader] = {}
_TALLIES: dict[tuple[str, str], Tally] = {}


async def _tally(name: str, grader: str) -> Tally:
    if (name, grader) not in _TALLIES:
        mine = [c for c in peer_tables.cases(name) if peer_tables.applies(c, grader)]
        _TALLIES[(name, grader)] = await peer_tables.grade_table(_GRADERS, grader, mine)
    return _TALLIES[(name, grader)]


def test_the_tables_cover_a_dozen_projects_and_every_text_grader() -> None:
    repos = {peer_tables.table(name)["repo"] for name in peer_tables.names()}
    assert len(repos) >= 12, repos
    assert {grader for _, grader in PAIRS} == {"math", "exact_match", "choice"}
    for name in peer_tables.names():
        data = peer_tables.table(name)
        assert data["license"] and data["copyright"] and len(data["commit"]) == 40, name


@pytest.mark.parametrize(("name", "grader"), PAIRS, ids=[f"{n}-{g}" for n, g in PAIRS])
async def test_no_false_pass_and_at_most_one_percent_false_fails(name: str, grader: str) -> None:
    tally = await _tally(name, grader)
    unexplained = [key for key, kind in tally.differing if kind == "fact"]
    assert not unexplained, unexplained
    assert not tally.false_passes, tally.false_passes
    assert len(tally.false_fails) <= 0.01 * tally.factual, (tally.false_fails, tally.factual)


async def test_every_listed_case_still_differs() -> None:
    """A convention, peer error or known failure on which every grader it measures now agrees
    with the peer is stale: drop it from conventions.json."""
    differing = {key for name, grader in PAIRS for key, _ in (await _tally(name, grader)).differing}
    listed = {key for reasons in EXCEPTIONS.values() for key in reasons}
    assert not listed - differing, sorted(listed - differing)


def test_known_failures_are_never_false_passes() -> None:
    """A known failure is a correct answer envbuilder misses, never a wrong one it accepts."""
    wrong = {c.key for name in peer_tables.names() for c in peer_tables.cases(name) if not c.expected}
    assert not wrong & set(EXCEPTIONS["known_failures"])


async def test_the_committed_card_is_what_the_tables_measure_now() -> None:
    """``envbuilder/graders/fidelity.json`` (``bench/grader_accuracy.py --card``) holds the
    figures the tables give now: a grader change that moves one is published only with the card
    measured again."""
    measured = card()["graders"]
    assert list(measured) == list(peer_tables.CONFIGS)
    for grader, entry in measured.items():
        tables = entry["peers"]["tables"]
        assert [t["table"] for t in tables] == [name for name, g in PAIRS if g == grader]
        total = Tally()
        for row in tables:
            tally = await _tally(row["table"], grader)
            total.absorb(tally)
            assert {k: row[k] for k in tally.rates()} == tally.rates(), (grader, row["table"])
        assert entry["peers"]["total"] == total.rates()
