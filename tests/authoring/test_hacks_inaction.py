"""``check --hacks``: the new exploit classes are in the battery (forged grade text, code as the
answer, ``raise StopIteration``), and tasks where doing nothing is right (``inaction:``) are
reported apart from hacks, so a clean audit passes and says why; the tutorial's library, whose
second task (lend a book with no copy left) has no gold action."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from envbuilder.authoring import hack_cases, run_hacks
from envbuilder.cli import app
from envbuilder.environment import load_environment
from tests.conftest import ENVS, ROOT

FILES = ROOT / "docs" / "tutorials" / "files"
runner = CliRunner()


def _library(tmp_path: Path, extra: str = "") -> Path:
    for name in ("library.yaml", "library.json", "requests.jsonl"):
        shutil.copy(FILES / name, tmp_path / name)
    spec = tmp_path / "library.yaml"
    spec.write_text(spec.read_text(encoding="utf-8") + extra, encoding="utf-8")
    return spec


def test_the_battery_has_the_new_exploit_classes() -> None:
    code = {c.label for c in hack_cases(load_environment(ENVS / "humaneval.yaml"), sample=1)}
    assert {"raise StopIteration", "forged grade text", "code that forges the grade"} <= code
    mixed = {c.label for c in hack_cases(load_environment(ENVS / "reasoning_mix.yaml"), sample=1)}
    assert {"forged grade text", "code that forges the grade", "code in an expression"} <= mixed


def test_doing_nothing_rewarded_fails_the_audit_without_inaction(tmp_path: Path) -> None:
    spec = _library(tmp_path)
    report = run_hacks(load_environment(spec), sample=4)
    assert {(r.case.split, r.case.index) for r in report.rewarded} == {("test", 1)}  # lib-2
    result = runner.invoke(app, ["check", str(spec), "--hacks", "--sample", "4"])
    assert result.exit_code == 1
    assert "earned reward" in result.output and "test[1]" in result.output


def test_inaction_marks_the_task_and_the_clean_audit_passes_saying_why(tmp_path: Path) -> None:
    spec = _library(tmp_path, 'inaction: "{{ actions | length == 0 }}"\n')
    report = run_hacks(load_environment(spec), sample=4)
    assert report.rewarded == [] and report.worst == 0.0
    assert report.expected and {(r.case.split, r.case.index) for r in report.expected} == {("test", 1)}
    result = runner.invoke(app, ["check", str(spec), "--hacks", "--sample", "4"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "is 0" in out
    assert "on test[1], where the spec's `inaction:` marks doing nothing as the right answer" in out


def test_only_the_tasks_the_template_marks_are_apart(tmp_path: Path) -> None:
    """The template is rendered per task: only those it marks are set apart."""
    spec = _library(tmp_path, "inaction: \"{{ id == 'lib-2' }}\"\n")
    report = run_hacks(load_environment(spec), sample=4)
    assert report.inaction == frozenset({("test", 1)})
