"""``envbuilder check --hacks``: hostile answers earn nothing on every shipped spec, and a
grader they fool is named with the answer and the task."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envbuilder.authoring import hack_cases, run_hacks
from envbuilder.cli import app
from envbuilder.environment import load_environment
from tests.conftest import ENVS

runner = CliRunner()
# mt_bench's judge needs a model endpoint (none in CI): its hostile answers are ungradeable
# there, which proves nothing; the judge's battery is checked below on its own.
SHIPPED = sorted(p for p in ENVS.glob("*.yaml") if p.stem != "mt_bench")
DATA = Path(__file__).parents[1] / "cli" / "invalid" / "data" / "tiny.parquet"


@pytest.mark.parametrize("spec", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_no_hostile_answer_earns_reward_on_a_shipped_spec(spec: Path) -> None:
    env = load_environment(spec)
    report = run_hacks(env, sample=1)
    assert report.results and report.worst == 0.0, [
        (r.case.label, r.reward, r.reason) for r in report.rewarded
    ]


def test_the_battery() -> None:
    names = {c.label for c in hack_cases(load_environment(ENVS / "humaneval.yaml"), sample=1)}
    assert {"empty", "whitespace", "the prompt echoed", "every choice", "many boxes"} <= names
    assert {"another task's answer", "a 1 MB spray", "os._exit(0)", "always-equal object"} <= names
    assert "rewrite the tests" in names
    judged = {c.label for c in hack_cases(load_environment(ENVS / "mt_bench.yaml"), sample=1)}
    assert {"prompt injection", "the reference alone"} <= judged
    spray = next(
        c for c in hack_cases(load_environment(ENVS / "gsm8k.yaml"), sample=1) if c.label == "a 1 MB spray"
    )
    assert spray.response is not None and len(spray.response) >= 1_000_000


def test_a_fooled_grader_fails_the_check_and_is_named(tmp_path: Path) -> None:
    shutil.copy(DATA, tmp_path / "tiny.parquet")
    spec = tmp_path / "weak.yaml"
    spec.write_text(
        "name: weak\ndataset: {type: parquet, files: {test: tiny.parquet}}\nsplits: {test: {type: test}}\n"
        'prompt: {template: "{{ question }}"}\n'
        # Any answer holding the final number anywhere passes: a spray of numbers does.
        "grader: {type: regex, pattern: \"{{ answer.split('####')[-1].strip() }}\"}\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["check", str(spec), "--hacks"])
    assert result.exit_code == 1
    assert "hacks: the highest reward of" in result.output and "(regex grader) is 1" in result.output
    assert "many boxes  test[0]  1" in result.output
    clean = runner.invoke(app, ["check", str(ENVS / "gsm8k.yaml"), "--hacks", "--sample", "2"])
    assert clean.exit_code == 0, clean.output
    assert "hacks: the highest reward of" in clean.output and "(exact_match grader) is 0" in clean.output


def test_the_old_humaneval_grader_is_caught(tmp_path: Path) -> None:
    """HumanEval graded by exit status alone (as shipped before the harness): os._exit(0) and an
    always-equal object earn 1.0, and the audit says so."""
    shutil.copytree(ENVS / "data" / "humaneval", tmp_path / "data" / "humaneval")
    spec = (ENVS / "humaneval.yaml").read_text(encoding="utf-8")
    start, end = spec.index("  program:"), spec.index("  reference:")
    old = '  program: "{{ prompt }}{{ answer }}\\n\\n{{ test }}\\n\\ncheck({{ entry_point }})\\n"\n'
    (tmp_path / "humaneval.yaml").write_text(spec[:start] + old + spec[end:], encoding="utf-8")
    report = run_hacks(load_environment(tmp_path / "humaneval.yaml"), sample=1)
    fooled = {r.case.label for r in report.rewarded}
    assert {"os._exit(0)", "always-equal object"} <= fooled, fooled


def test_harbor_tasks_get_the_container_hacks_and_check_gets_their_empty_solutions() -> None:
    from envbuilder.authoring import gold_cases
    from envbuilder.authoring._hacks import CONTAINER_HACKS, HARBOR_HACKS

    env = load_environment(ENVS.parent / "tests" / "fixtures" / "harbor" / "harbor.yaml")
    made = [c for c in hack_cases(env, sample=1) if c.calls]
    assert [c.label for c in made] == [*CONTAINER_HACKS, *HARBOR_HACKS]
    assert all(c.response == "" and c.expected == 0.0 and c.calls[0]["name"] == "bash" for c in made)  # type: ignore[index]
    cases = gold_cases(env, sample=5)
    assert [(c.kind, c.index) for c in cases] == [("gold", 0), ("empty", 0), ("gold", 1), ("empty", 1)]
    assert [c.calls for c in cases if c.kind == "empty"] == [None, None]
    assert all(c.calls and c.calls[0]["name"] == "bash" for c in cases if c.kind == "gold")
