"""The grader fidelity card: how often each text grader's verdict is right, and on what.

``python bench/grader_accuracy.py --card`` measures it and writes ``fidelity.json`` beside this
module: for ``math``, ``exact_match`` (``extract: number``) and ``choice``, the false-pass and
false-fail rates on other projects' own test tables (``tests/graders/peers/``: each table's
repository, commit and licence; only their factual cases count, conventions and wrong peer
verdicts are left out with a reason each) and on the shipped benchmarks' gold answers in every
form a model writes them and wrong answers made from them. The card is committed, so serving a
spec never computes it; :func:`fidelity_of` reads it for a spec's grader (each grader of a
composite), which is what a catalog entry publishes.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from envbuilder.graders._base import GraderConfig

__all__ = ["card", "card_key", "fidelity_of", "markdown_table", "tables_markdown"]

#: Why a grader type has no card.
_UNMEASURED = {
    "reasoning_gym": "each task family's own checker decides (reasoning-gym's `score_answer`)",
    "llm_judge": "a judge's verdicts are a model's: measure them on the spec's own tasks (`envbuilder eval`)",
    "regex": "a regex grader's verdict is its pattern's: nothing to compare across projects",
    "unit_tests": "tests decide: `envbuilder check --hacks` audits what could pass them without solving",
    "repo_tests": "the repository's own tests decide (SWE-bench's rule); `check --hacks` audits the "
    "container exploits",
}


@functools.cache
def card() -> dict[str, Any]:
    """The committed card (``fidelity.json``)."""
    text = resources.files(__package__).joinpath("fidelity.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


def card_key(config: GraderConfig) -> str | None:
    """The card that measures ``config``'s grader (``math``, ``exact_match``, ``choice``), or
    None (a grader type, or a setting, no table measures)."""
    kind = config.type
    if kind == "exact_match":
        return "exact_match" if getattr(config, "extract", None) == "number" else None
    return kind if kind in ("math", "choice") else None


def fidelity_of(config: GraderConfig) -> list[dict[str, Any]]:
    """One summary per grader in ``config`` (a composite's graders in order, itself left out):
    which tables measured it and its rates, or why it is not measured."""
    nested = getattr(config, "graders", None)
    if isinstance(nested, list):
        return [entry for inner in nested for entry in fidelity_of(inner)]
    key = card_key(config)
    if key is None:
        why = _UNMEASURED.get(config.type)
        if config.type == "exact_match":
            why = "measured with `extract: number` only: other settings compare text as the spec says"
        return [{"grader": config.type, "measured": False, "why": why or "no table measures this grader"}]
    measured = card()["graders"][key]
    peers = measured["peers"]
    return [
        {
            "grader": config.type,
            "measured": True,
            "card": key,
            "tables": [f"{t['repo']}@{t['commit'][:10]}" for t in peers["tables"]],
            "factual_cases": peers["total"]["factual"],
            "false_pass_rate": peers["total"]["false_pass_rate"],
            "false_fail_rate": peers["total"]["false_fail_rate"],
            "benchmarks": [
                {k: b[k] for k in ("benchmark", "correct", "false_fail_rate", "wrong", "false_pass_rate")}
                for b in measured["benchmarks"]
            ],
        }
    ]


#: How the card names each grader it measures.
LABELS = {"math": "`math`", "exact_match": "`exact_match` (`extract: number`)", "choice": "`choice`"}


def _pct(rate: float) -> str:
    return f"{100 * rate:.1f} %"


def markdown_table(measured: dict[str, Any]) -> str:
    """The card's summary as a Markdown table: one row per grader (the docs' graders page)."""
    lines = [
        "| grader | peer tables (projects) | factual cases | false passes | false fails | "
        "shipped benchmark: gold forms scored 1 / wrong answers scored 0 |",
        "|---|---|---|---|---|---|",
    ]
    for key, entry in measured["graders"].items():
        total, tables = entry["peers"]["total"], entry["peers"]["tables"]
        projects = len({t["repo"] for t in tables})
        bench = "; ".join(
            f"{b['benchmark']}: {b['correct'] - b['false_fails']:,}/{b['correct']:,} · "
            f"{b['wrong'] - b['false_passes']:,}/{b['wrong']:,}"
            for b in entry["benchmarks"]
        )
        lines.append(
            f"| {LABELS.get(key, key)} | {len(tables)} ({projects}) | {total['factual']:,} | "
            f"{total['false_passes']} ({_pct(total['false_pass_rate'])}) | "
            f"{total['false_fails']} ({_pct(total['false_fail_rate'])}) | {bench or '—'} |"
        )
    return "\n".join(lines)


def tables_markdown(measured: dict[str, Any]) -> str:
    """Every table's figures, grader by grader, as a Markdown table."""
    lines = [
        "| grader | table | repository@commit (licence) | cases | conventions | peer errors | factual "
        "| false passes | false fails |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, entry in measured["graders"].items():
        for t in entry["peers"]["tables"]:
            source = f"{t['repo']}@{t['commit'][:10]} ({t['license']})"
            lines.append(
                f"| {LABELS.get(key, key)} | `{t['table']}` | {source} "
                f"| {t['cases']} | {t['conventions']} | {t['peer_errors']} | {t['factual']} "
                f"| {t['false_passes']} | {t['false_fails']} |"
            )
    return "\n".join(lines)
