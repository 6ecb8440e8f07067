"""Resuming into a results file: one test per field of the run's identity. Each changes only that
field, and the file must be refused with a message naming the option that differs."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from envbuilder.environment import load_environment
from envbuilder.eval import (
    ChatModel,
    LocalBackend,
    RemoteBackend,
    RunIdentity,
    RunMismatch,
    Sampling,
    plan_eval,
)
from envbuilder.eval._run import _OPTIONS, _SAMPLING
from envbuilder.server import create_app
from tests.eval.conftest import write_arithmetic
from tests.servers import serve_app

URL = "http://127.0.0.1:9/v1"  # never called: planning a run talks to no model


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_arithmetic(tmp_path / "envs")


def plan(spec: Path | None = None, url: str | None = None, out: Path | None = None, **changes: Any):
    """Plan the baseline run (square, test, first 3 tasks, model m) with ``changes``."""
    sampling = changes.pop("sampling", {})
    model = ChatModel(changes.pop("endpoint", URL), changes.pop("model", "m"), sampling=Sampling(**sampling))
    options = {"split": "test", "limit": 3, "samples": 1, "max_turns": 10, "answer": "tool", **changes}

    async def go():
        b = await RemoteBackend.connect(url) if url else LocalBackend(load_environment(spec))
        try:
            return await plan_eval(b, model, out=out, **options)
        finally:
            await model.aclose()
            await b.aclose()

    return asyncio.run(go())


def refused(out: Path, message: str, **changes: Any) -> None:
    with pytest.raises(RunMismatch) as caught:
        plan(out=out, **changes)
    assert "belongs to another run" in str(caught.value)
    assert message in str(caught.value), str(caught.value)


def test_the_baseline_resumes(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    first = plan(folder / "square.yaml", out=out)
    again = plan(folder / "square.yaml", out=out)
    assert first.identity == again.identity and len(again.todo) == 3


def test_every_identity_field_has_a_resume_test() -> None:
    # the tests below cover these; a new field must get its own test
    covered = {"env", "env_hash", "server", "split", "limit", "model", "endpoint", "sampling", "samples",
               "max_turns", "answer", "endpoints"}  # fmt: skip
    assert set(RunIdentity.__dataclass_fields__) == covered == set(_OPTIONS)


def test_env(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    plan(folder / "square.yaml", out=out)
    refused(out, 'the environment: "square" in the file, "cube" now', spec=folder / "cube.yaml")


def test_env_hash(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    plan(folder / "square.yaml", out=out)
    data = folder / "data" / "square.parquet"
    table = pq.read_table(data)
    pq.write_table(table.set_column(1, "value", pa.array(["0"] * len(table))), data)  # the data changed
    refused(out, "the environment's content hash: \"sha256:", spec=folder / "square.yaml")


def test_server(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    plan(folder / "square.yaml", out=out)
    env = load_environment(folder / "square.yaml")
    with serve_app(create_app([env])) as url:
        refused(out, f'the ORS server: null in the file, "{url}" now', url=url)


def test_split(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    spec = Path(__file__).parents[2] / "envs" / "gsm8k.yaml"
    plan(spec, out=out)
    refused(out, '--split: "test" in the file, "train" now', spec=spec, split="train")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("limit", 4, "--limit: 3 in the file, 4 now"),
        ("model", "other", '--model: "m" in the file, "other" now'),
        (
            "endpoint",
            "http://127.0.0.1:10/v1",
            f'--base-url: "{URL}" in the file, "http://127.0.0.1:10/v1" now',
        ),
        ("samples", 2, "--samples: 1 in the file, 2 now"),
        ("max_turns", 3, "--max-turns: 10 in the file, 3 now"),
        ("answer", "text", '--answer: "tool" in the file, "text" now'),
    ],
)
def test_option(folder: Path, tmp_path: Path, field: str, value: Any, message: str) -> None:
    out = tmp_path / "r.jsonl"
    plan(folder / "square.yaml", out=out)
    refused(out, message, spec=folder / "square.yaml", **{field: value})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("temperature", 0.7),
        ("top_p", 0.9),
        ("max_tokens", 64),
        ("seed", 1),
        ("extra", {"reasoning_effort": "low"}),
    ],
)
def test_sampling(folder: Path, tmp_path: Path, name: str, value: Any) -> None:
    out = tmp_path / "r.jsonl"
    plan(folder / "square.yaml", out=out)
    before, shown = ("{}", '{"reasoning_effort": "low"}') if name == "extra" else ("null", str(value))
    refused(out, f"{_SAMPLING[name]}: {before} in the file, {shown} now", spec=folder / "square.yaml",
            sampling={name: value})  # fmt: skip


def test_a_header_without_the_answer_field_resumes_as_tool(folder: Path, tmp_path: Path) -> None:
    """A results file of the previous version (no ``answer`` in its header) is a tool-mode run."""
    import json

    out = tmp_path / "r.jsonl"
    plan(folder / "square.yaml", out=out)
    lines = out.read_text().splitlines()
    head = json.loads(lines[0])
    del head["run"]["answer"]
    out.write_text(json.dumps(head) + "\n")
    assert plan(folder / "square.yaml", out=out).identity.answer == "tool"
    shutil.copy(out, tmp_path / "copy.jsonl")
    refused(tmp_path / "copy.jsonl", '--answer: "tool" in the file, "text" now', spec=folder / "square.yaml",
            answer="text")  # fmt: skip


JUDGE_AND_USER = """\
grader:
  type: llm_judge
  base_url: http://127.0.0.1:9/v1
  model: judge
  reference: "{{ value }}"
user:
  base_url: http://127.0.0.1:9/v1
  model: user
  template: "You are the customer. Say ###STOP### when done."
"""


@pytest.fixture
def judged(folder: Path) -> Path:
    """square.yaml with an llm_judge grader and a simulated user (neither is called by planning)."""
    spec = folder / "judged.yaml"
    text = (folder / "square.yaml").read_text()
    spec.write_text(text[: text.index("grader:")].replace("name: square", "name: judged") + JUDGE_AND_USER)
    return spec


@pytest.mark.parametrize("role", ["judge", "user"])
@pytest.mark.parametrize(("name", "value"), [("model", "other"), ("base_url", "http://127.0.0.1:10/v1")])
def test_endpoints(
    judged: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: str, name: str, value: str
) -> None:
    """Another judge or simulated user (a flag sets its variable) is another run."""
    out = tmp_path / "r.jsonl"
    plan(judged, out=out)
    monkeypatch.setenv(f"ENVBUILDER_{role.upper()}_{name.upper()}", value)
    option = f"--{role}-{name.replace('_', '-')} (or $ENVBUILDER_{role.upper()}_{name.upper()})"
    refused(out, f'{option}: null in the file, "{value}" now', spec=judged)
    shutil.copy(out, tmp_path / "copy.jsonl")  # and back: a run with an override refuses one without
    plan(judged, out=tmp_path / "other.jsonl")
    monkeypatch.delenv(f"ENVBUILDER_{role.upper()}_{name.upper()}")
    refused(tmp_path / "other.jsonl", f'{option}: "{value}" in the file, null now', spec=judged)


def test_an_endpoint_is_recorded_without_credentials_and_never_a_key(
    judged: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "r.jsonl"
    monkeypatch.setenv("ENVBUILDER_JUDGE_BASE_URL", "http://ann:pa55word@127.0.0.1:9/v1?token=t0ken#frag")
    monkeypatch.setenv("ENVBUILDER_JUDGE_API_KEY", "sk-judge-must-never-leak")
    first = plan(judged, out=out)
    assert first.identity.endpoints == {"judge": {"base_url": "http://127.0.0.1:9/v1"}}
    text = out.read_text()
    assert all(secret not in text for secret in ("ann", "pa55word", "t0ken", "frag", "sk-judge"))
    monkeypatch.setenv("ENVBUILDER_JUDGE_API_KEY", "sk-another-key")  # another key: the same run
    assert plan(judged, out=out).identity == first.identity


def test_a_header_without_endpoints_resumes_without_overrides(judged: Path, tmp_path: Path) -> None:
    """Files written before the field existed (no ``endpoints``) keep their run and run_id."""
    import json

    out = tmp_path / "r.jsonl"
    first = plan(judged, out=out)
    head = json.loads(out.read_text().splitlines()[0])
    assert "endpoints" not in head["run"]
    old = {k: v for k, v in first.identity.to_dict().items() if k != "endpoints"}
    assert head["run"] == old and head["run_id"] == first.identity.run_id
    assert plan(judged, out=out).identity == first.identity


def test_eval_refuses_to_resume_a_run_with_another_judge(judged: Path, tmp_path: Path) -> None:
    """The auditor's case, through the CLI: --judge-model on a file of the spec's judge."""
    from typer.testing import CliRunner

    from envbuilder.cli import app

    out = tmp_path / "r.jsonl"
    plan(judged, out=out)
    args = ["eval", str(judged), "--model", "m", "--base-url", URL, "--split", "test", "--limit", "3",
            "--out", str(out)]  # fmt: skip
    result = CliRunner().invoke(app, [*args, "--judge-model", "other-judge"])
    assert result.exit_code == 1, result.output
    assert "belongs to another run" in result.output
    assert '--judge-model (or $ENVBUILDER_JUDGE_MODEL): null in the file, "other-judge" now' in result.output
