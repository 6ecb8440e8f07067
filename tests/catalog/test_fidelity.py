"""Each catalog entry publishes its grader's fidelity card, read from the committed
``envbuilder/graders/fidelity.json`` (``bench/grader_accuracy.py --card`` writes it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from envbuilder.catalog import build_catalog, catalog_entry, write_site
from envbuilder.environment import load_environment
from envbuilder.graders import fidelity_of
from envbuilder.graders._fidelity import card
from envbuilder.spec._models import GraderField
from tests.conftest import ENVS

_ADAPTER: TypeAdapter[Any] = TypeAdapter(GraderField)


def test_a_measured_grader_names_its_tables_and_rates() -> None:
    (math,) = catalog_entry(load_environment(ENVS / "math500.yaml"))["fidelity"]
    measured = card()["graders"]["math"]
    assert (math["grader"], math["measured"], math["card"]) == ("math", True, "math")
    assert math["tables"] == [f"{t['repo']}@{t['commit'][:10]}" for t in measured["peers"]["tables"]]
    assert len({t.split("@")[0] for t in math["tables"]}) >= 12  # projects, not only tables
    assert math["factual_cases"] == measured["peers"]["total"]["factual"] > 500
    assert math["false_pass_rate"] == 0.0 and math["false_fail_rate"] <= 0.01
    assert [b["benchmark"] for b in math["benchmarks"]] == ["MATH-500"]
    (gsm8k,) = catalog_entry(load_environment(ENVS / "gsm8k.yaml"))["fidelity"]
    assert (gsm8k["grader"], gsm8k["card"]) == ("exact_match", "exact_match")
    assert [b["benchmark"] for b in gsm8k["benchmarks"]] == ["GSM8K test"]
    (mmlu,) = catalog_entry(load_environment(ENVS / "mmlu_stem.yaml"))["fidelity"]
    assert mmlu["card"] == "choice" and mmlu["benchmarks"][0]["false_fail_rate"] == 0.0


def test_an_unmeasured_grader_says_why() -> None:
    (judge,) = catalog_entry(load_environment(ENVS / "mt_bench.yaml"))["fidelity"]
    assert judge["grader"] == "llm_judge" and judge["measured"] is False
    assert "model" in judge["why"]
    (text,) = catalog_entry(load_environment(ENVS / "hh_rlhf.yaml"))["fidelity"]  # exact_match, no extract
    assert text == {
        "grader": "exact_match",
        "measured": False,
        "why": "measured with `extract: number` only: other settings compare text as the spec says",
    }


def test_a_composite_lists_each_of_its_graders() -> None:
    cascade = _ADAPTER.validate_python(
        {
            "type": "cascade",
            "graders": [
                {"type": "exact_match", "target": "{{ answer }}", "extract": "number"},
                {"type": "all", "graders": [{"type": "math", "target": "{{ answer }}"}]},
                {"type": "regex", "pattern": "x"},
            ],
        }
    )
    found = [(f["grader"], f["measured"]) for f in fidelity_of(cascade)]
    assert found == [("exact_match", True), ("math", True), ("regex", False)]


def test_the_catalog_page_shows_the_card(tmp_path: Path) -> None:
    envs = [load_environment(ENVS / name) for name in ("math500.yaml", "mt_bench.yaml")]
    write_site(build_catalog(envs), tmp_path)
    math = (tmp_path / "env" / "math500.html").read_text(encoding="utf-8")
    rate = card()["graders"]["math"]["peers"]["total"]
    assert 'id="fidelity"' in math
    assert f"on {rate['factual']:,} factual cases of" in math and "0.0 % false passes" in math
    assert "MATH-500" in math and "huggingface/Math-Verify@" in math
    judge = (tmp_path / "env" / "mt_bench.html").read_text(encoding="utf-8")
    assert "<code>llm_judge</code>: not measured (a judge" in judge
