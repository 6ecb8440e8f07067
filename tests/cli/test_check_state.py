"""`envbuilder check` on a stateful spec whose tool is broken: the gold replay's failing calls
make ``state_match`` void (never a pass), and ``check`` fails naming the task and the call and
says how many gold actions succeeded. The tutorial's library, copied, with ``lend_book``
intact (its declarative steps) or broken (a Python function that raises on every call)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from envbuilder.cli import app
from envbuilder.environment import load_environment
from envbuilder.integrations import LocalEpisode
from tests.conftest import ROOT

FILES = ROOT / "docs" / "tutorials" / "files"
runner = CliRunner()

BROKEN = '''

def lend_book(db, member_id: str, book_id: str) -> str:
    """Lend a copy of a book to a member.

    Args:
        member_id: The member's id, e.g. m1.
        book_id: The book's id, e.g. b1.
    """
    raise RuntimeError("the loans database is unreachable")
'''


def _library(tmp_path: Path, broken: bool) -> Path:
    for name in ("library.yaml", "library.json", "requests.jsonl"):
        shutil.copy(FILES / name, tmp_path / name)
    spec = tmp_path / "library.yaml"
    if broken:
        (tmp_path / "library.py").write_text(BROKEN, encoding="utf-8")
        data = yaml.safe_load(spec.read_text(encoding="utf-8"))
        python = {"type": "function", "module": "library.py", "name": "lend_book"}
        data["tools"] = [python if t.get("name") == "lend_book" else t for t in data["tools"]]
        spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return spec


def test_an_intact_library_passes_and_counts_its_gold_actions(tmp_path: Path) -> None:
    spec = _library(tmp_path, broken=False)
    result = runner.invoke(app, ["check", str(spec)])
    assert result.exit_code == 0, result.output
    actions = re.search(r"gold actions: (\d+)/(\d+) succeeded", result.output)
    assert actions is not None and actions[1] == actions[2] and int(actions[2]) > 0, result.output


def test_a_broken_tool_fails_check_naming_the_task_and_the_call(tmp_path: Path) -> None:
    spec = _library(tmp_path, broken=True)
    result = runner.invoke(app, ["check", str(spec)])
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    done = re.search(r"gold actions: (\d+)/(\d+) succeeded", out)
    assert done is not None and int(done[1]) < int(done[2]), out
    assert "test[0]" in out  # the task (lib-1: lend Dune to Ada)
    assert "(lend_book) failed" in out
    passed = re.search(r"gold answers: (\d+)/(\d+) get full reward", out)
    assert passed is not None and int(passed[1]) < int(passed[2])


@pytest.mark.parametrize("calls", [[], [("lend_book", {"member_id": "m1", "book_id": "b1"})]])
def test_state_match_is_void_when_the_gold_replay_fails(
    tmp_path: Path, calls: list[tuple[str, dict[str, str]]]
) -> None:
    """Whatever the agent did (nothing, or the same failing call), an episode compared with a
    replay that failed is not paid: void, reward null, the failing call named (position and
    tool only: its arguments are gold)."""
    env = load_environment(_library(tmp_path, broken=True))
    episode = LocalEpisode.of(env, "test", 0)
    for name, arguments in calls:
        episode.call(name, arguments)
    out = episode.call("submit", {"answer": "Done."})
    assert out.finished and out.reward is None
    void = out.metadata["void"]
    assert "call 1 of 1 (lend_book)" in void and "m1" not in void and "b1" not in void
    assert "gold_errors" not in out.metadata  # gold details stay hidden


def test_an_empty_gold_replay_still_grades(tmp_path: Path) -> None:
    """A task whose gold is to change nothing replays no call: graded as before."""
    env = load_environment(_library(tmp_path, broken=True))
    episode = LocalEpisode.of(env, "test", 1)
    out = episode.call("submit", {"answer": "Emma has no copy left."})
    assert out.reward == 1.0


def test_a_dialogue_spec_says_why_no_gold_answer_is_checked() -> None:
    result = runner.invoke(app, ["check", str(ROOT / "envs" / "mt_bench.yaml"), "--sample", "2"])
    out = " ".join(result.output.split())
    assert "gold answers: none checked (--sample 2 per split: test 2 of 80)" in out
    assert "a dialogue, graded turn by turn by its llm_judge grader" in out
    assert "0/0" not in out and "circular" not in out
