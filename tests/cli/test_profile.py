"""``envbuilder profile``: a scripted model on a local chat server, the per-task table, a split
filtered on it, resuming, and the catalog's histogram."""

from __future__ import annotations

import collections
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from envbuilder.catalog import build_catalog, catalog_entry, write_site
from envbuilder.cli import app
from envbuilder.environment import load_environment
from tests.fakes.chat_server import ChatServer, tool_call_reply

SAMPLES = 4


def _spec(folder: Path, **split: Any) -> Path:
    (folder / "tasks.jsonl").write_text(
        "".join(json.dumps({"question": f"Question number {i}.", "answer": str(i)}) + "\n" for i in range(5))
    )
    spec = {
        "name": "five",
        "dataset": {"type": "jsonl", "files": {"test": "tasks.jsonl"}},
        "splits": {"test": {}, **split},
        "prompt": {"template": "{{ question }}"},
        "grader": {"type": "exact_match", "target": "{{ answer }}"},
    }
    path = folder / "five.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


class Scripted:
    """Questions 0 and 1: always right; 2: right every other time; 3 and 4: always wrong."""

    def __init__(self) -> None:
        self.seen: collections.Counter[int] = collections.Counter()
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any], _: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        text = json.dumps(request["messages"][0]["content"])
        i = int(re.search(r"Question number (\d)", text)[1])  # type: ignore[index]
        with self.lock:
            self.seen[i] += 1
            k = self.seen[i]
        right = i < 2 or (i == 2 and k % 2 == 0)
        return 200, tool_call_reply("submit", json.dumps({"answer": str(i if right else 99)})), {}


def _profile(spec: Path, url: str, out: Path) -> Any:
    args = [
        "profile",
        str(spec),
        "--model",
        "m",
        "--base-url",
        url,
        "--samples",
        str(SAMPLES),
        "--out",
        str(out),
    ]
    return CliRunner().invoke(app, args, env={"OPENAI_API_KEY": ""})


def test_profile_writes_the_table_and_a_split_filters_on_it(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    out = tmp_path / "profiles" / "five.jsonl"
    scripted = Scripted()
    with ChatServer(scripted) as server:
        result = _profile(spec, server.base_url, out)
        assert result.exit_code == 0, result.output
        assert len(server.requests) == 5 * SAMPLES
        table = [
            json.loads(line) for line in (tmp_path / "profiles" / "five.tasks.jsonl").read_text().splitlines()
        ]
        assert [(r["id"], r["pass_rate"], r["mean_reward"], r["samples"]) for r in table] == [
            ("test-0", 1.0, 1.0, 4),
            ("test-1", 1.0, 1.0, 4),
            ("test-2", 0.5, 0.5, 4),
            ("test-3", 0.0, 0.0, 4),
            ("test-4", 0.0, 0.0, 4),
        ]
        assert all(r["tokens"] == 15 and r["source_split"] == "test" for r in table)
        assert "per-task table in" in result.output
        # A rerun resumes the run: nothing is asked of the model again.
        again = _profile(spec, server.base_url, out)
        assert again.exit_code == 0, again.output
        assert len(server.requests) == 5 * SAMPLES

    filtered = _spec(
        tmp_path,
        learnable={
            "source": "test",
            "profile": "profiles/five.tasks.jsonl",
            "filter": "pass_rate > 0 and pass_rate < 1",
        },
        solved={"source": "test", "profile": "profiles/five.tasks.jsonl", "filter": "pass_rate == 1"},
    )
    env = load_environment(filtered)
    assert [t["id"] for t in env.split("learnable").task_range(0, 10)] == ["test-2"]
    assert [t["id"] for t in env.split("solved").task_range(0, 10)] == ["test-0", "test-1"]
    assert "profiles/five.tasks.jsonl" in env.files  # packs and catalogs carry the table
    splits = {s["name"]: s for s in catalog_entry(env)["splits"]}
    assert splits["learnable"]["profile"]["histogram"] == [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]
    assert splits["solved"]["profile"]["histogram"] == [0] * 10 + [2]
    assert "profile" not in splits["test"]
    write_site(build_catalog([env]), tmp_path / "site")
    page = (tmp_path / "site" / "env" / "five.html").read_text()
    assert splits["solved"]["profile"]["sparkline"] == " " * 10 + "█"
    assert f"0 {splits['solved']['profile']['sparkline']} 1" in page and "(2 tasks)" in page


def test_a_filter_on_a_profile_names_unknown_fields(tmp_path: Path) -> None:
    (tmp_path / "t.tasks.jsonl").write_text(
        json.dumps({"id": "test-0", "source_split": "test", "row": 0, "pass_rate": 0.5, "samples": 2}) + "\n"
    )
    spec = _spec(tmp_path, hard={"source": "test", "profile": "t.tasks.jsonl", "filter": "pass_rat < 1"})
    from envbuilder.errors import SpecError

    with pytest.raises(SpecError) as info:
        load_environment(spec)
    (problem,) = info.value.problems
    assert problem.loc == ("splits", "hard", "filter")
    assert problem.hint == "Did you mean 'pass_rate'?"


def test_a_missing_profile_is_a_located_error(tmp_path: Path) -> None:
    from envbuilder.errors import SpecError

    spec = _spec(tmp_path, hard={"source": "test", "profile": "nowhere.jsonl"})
    with pytest.raises(SpecError) as info:
        load_environment(spec)
    (problem,) = info.value.problems
    assert problem.loc == ("splits", "hard", "profile") and problem.code == "profile_unreadable"


def test_a_huge_generated_split_needs_a_limit(tmp_path: Path) -> None:
    spec = tmp_path / "gen.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "gen",
                "dataset": {"type": "generator", "generator": "arithmetic", "num_tasks": 10**9},
                "splits": {"test": {}},
                "prompt": {"template": "{{ question }}"},
                "grader": {"type": "exact_match", "target": "{{ answer }}"},
            }
        )
    )
    with ChatServer(Scripted()) as server:
        result = _profile(spec, server.base_url, tmp_path / "p.jsonl")
        assert result.exit_code == 1
        assert "split 'test' has 1,000,000,000 tasks" in result.output and "--limit" in result.output
        assert server.requests == []


def test_a_served_spec_reads_no_profile_outside_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envbuilder.errors import SpecError

    outside = tmp_path / "elsewhere.tasks.jsonl"
    outside.write_text(json.dumps({"source_split": "test", "row": 0, "pass_rate": 1.0}) + "\n")
    folder = tmp_path / "spec"
    folder.mkdir()
    spec = _spec(folder, solved={"source": "test", "profile": "../elsewhere.tasks.jsonl"})
    assert len(load_environment(spec).split("solved")) == 1  # an authoring command reads it
    monkeypatch.setenv("ENVBUILDER_CONTAIN_FILES", "1")  # as `serve` runs specs
    with pytest.raises(SpecError) as info:
        load_environment(spec)
    (problem,) = info.value.problems
    assert (problem.loc, problem.code) == (("splits", "solved", "profile"), "data_outside")
