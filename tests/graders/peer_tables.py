"""Other graders' own test tables (``peers/*.json``), graded by envbuilder's graders.

Each table is one peer's test file(s), transcribed by ``bench/peer_cases.py`` with its
repository, commit and licence, and each case with its path and line (see ``peers/README.md``).
A case is keyed ``repo:path:line`` (``#2``, ``#3``… for further cases of one line). It measures
the graders its table (or the case) names, where they apply: ``exact_match`` (``extract:
number``) cases whose gold is one number, ``choice`` cases whose gold is one option letter.

``peers/conventions.json`` lists, by key, the cases not counted as facts, each with its reason:
*conventions* (a verdict that is a peer's choice of format or form, not the answer's value: a
required ``####`` or ``<think>`` section, strings compared as strings, a decimal comma), *peer
errors* (a verdict that is wrong: ``1 - 1/e`` = ``1 + 1/e``), and envbuilder's *known failures*.
Everything else is a fact: envbuilder must agree with the peer.

Used by ``tests/graders/test_peer_cases.py`` (the targets) and ``bench/grader_accuracy.py``
(the fidelity card).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envbuilder.graders import Grader
from envbuilder.graders._normalize import canonical_number
from tests.graders._util import make

PEERS = Path(__file__).parent / "peers"
#: The grader blocks the tables are graded with.
CONFIGS: dict[str, dict[str, Any]] = {
    "math": {"type": "math", "target": "{{ answer }}"},
    "exact_match": {"type": "exact_match", "target": "{{ answer }}", "extract": "number"},
    "choice": {"type": "choice", "target": "{{ answer }}"},
}
EXCEPTIONS: dict[str, dict[str, str]] = {
    kind: reasons
    for kind, reasons in json.loads((PEERS / "conventions.json").read_text(encoding="utf-8")).items()
    if kind in ("conventions", "peer_errors", "known_failures")
}


@dataclass(frozen=True)
class Case:
    key: str
    table: str
    gold: str
    answer: str
    expected: bool
    options: dict[str, Any]
    graders: tuple[str, ...]

    @property
    def kind(self) -> str:
        """``convention``, ``peer_error``, ``known_failure`` or ``fact``."""
        for kind in ("conventions", "peer_errors", "known_failures"):
            if self.key in EXCEPTIONS[kind]:
                return kind.removesuffix("s")
        return "fact"

    def config(self, grader: str) -> dict[str, Any]:
        block = dict(CONFIGS[grader])
        if grader == "math" and "precision" in self.options:
            block["float_rounding"] = self.options["precision"]
        return block


def names() -> list[str]:
    """The tables, by file name."""
    return sorted(p.stem for p in PEERS.glob("*.json") if p.stem != "conventions")


def table(name: str) -> dict[str, Any]:
    return dict(json.loads((PEERS / f"{name}.json").read_text(encoding="utf-8")))


def cases(name: str) -> list[Case]:
    data = table(name)
    seen: dict[str, int] = {}
    out = []
    for c in data["cases"]:
        key = f"{data['repo']}:{c['path']}:{c['line']}"
        seen[key] = seen.get(key, 0) + 1
        out.append(
            Case(
                key=key if seen[key] == 1 else f"{key}#{seen[key]}",
                table=name,
                gold=c["gold"],
                answer=c["answer"],
                expected=bool(c["expected"]),
                options=c.get("options", {}),
                graders=tuple(c.get("graders", data["graders"])),
            )
        )
    return out


def applies(case: Case, grader: str) -> bool:
    """Whether ``case`` measures ``grader`` (see the module docstring)."""
    if grader not in case.graders:
        return False
    if grader == "exact_match":
        return canonical_number(case.gold) is not None
    if grader == "choice":
        return len(case.gold.strip().strip("()")) == 1 and case.gold.strip().strip("()").isalpha()
    return True


def measured(grader: str) -> Iterator[tuple[str, list[Case]]]:
    """(table, its cases that measure ``grader``) for every table with any."""
    for name in names():
        mine = [c for c in cases(name) if applies(c, grader)]
        if mine:
            yield name, mine


@dataclass
class Tally:
    """How a grader's verdicts compare with a table's."""

    cases: int = 0
    agree: int = 0
    factual: int = 0
    false_passes: list[str] = field(default_factory=list)
    """Factual cases the peer fails and envbuilder passes."""
    false_fails: list[str] = field(default_factory=list)
    """Factual cases the peer passes and envbuilder does not (known failures among them)."""
    excluded: dict[str, int] = field(default_factory=dict)
    """Cases not counted as facts, by kind (convention, peer_error)."""
    differing: list[tuple[str, str]] = field(default_factory=list)
    """(key, kind) of every case where envbuilder and the peer differ."""
    agreeing_exceptions: list[str] = field(default_factory=list)
    """Listed exceptions on which envbuilder now agrees with the peer."""

    def add(self, case: Case, passed: bool) -> None:
        self.cases += 1
        agree = passed == case.expected
        self.agree += agree
        kind = case.kind
        if not agree:
            self.differing.append((case.key, kind))
        elif kind != "fact":
            self.agreeing_exceptions.append(case.key)
        if kind in ("convention", "peer_error"):
            self.excluded[kind] = self.excluded.get(kind, 0) + 1
            return
        self.factual += 1
        if not agree:
            (self.false_passes if passed else self.false_fails).append(case.key)

    def absorb(self, other: Tally) -> None:
        """Add ``other``'s counts to these (a grader's total over its tables)."""
        self.cases += other.cases
        self.agree += other.agree
        self.factual += other.factual
        self.false_passes += other.false_passes
        self.false_fails += other.false_fails
        for kind, n in other.excluded.items():
            self.excluded[kind] = self.excluded.get(kind, 0) + n

    def rates(self) -> dict[str, Any]:
        n = self.factual or 1
        return {
            "cases": self.cases,
            "factual": self.factual,
            "agree": self.agree,
            "false_passes": len(self.false_passes),
            "false_fails": len(self.false_fails),
            "false_pass_rate": round(len(self.false_passes) / n, 4),
            "false_fail_rate": round(len(self.false_fails) / n, 4),
            "conventions": self.excluded.get("convention", 0),
            "peer_errors": self.excluded.get("peer_error", 0),
        }


async def grade_table(graders: dict[tuple[str, int], Grader], grader: str, mine: list[Case]) -> Tally:
    """Grade ``mine`` with ``grader`` and tally the verdicts (a pass is a reward of 1);
    ``graders`` keeps one built grader per setting across calls."""
    tally = Tally()
    for case in mine:
        block = case.config(grader)
        slot = (grader, int(block.get("float_rounding", -1)))
        if slot not in graders:
            graders[slot] = make(block)
        result = await graders[slot].grade(case.answer, {"answer": case.gold}, {})
        tally.add(case, result.score == 1.0)
    return tally
