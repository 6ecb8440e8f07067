"""`envbuilder serve --door`: the doors open on the real command (one process, and workers
sharing Redis), and what a door cannot serve is refused before anything listens."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from tests.conftest import ENVS
from tests.processes import serve_process

runner = CliRunner()


def test_a_spec_a_door_cannot_express_is_refused_at_start_up() -> None:
    specs = [str(ENVS / "gsm8k.yaml"), str(ENVS / "math500.yaml")]
    result = runner.invoke(app, ["serve", *specs, "--door", "nemo-gym", "--port", "0"])
    assert result.exit_code == 1
    assert result.output.startswith(
        "error: the nemo-gym door cannot serve what it was given: 2 environments are served (gsm8k, math500)"
    )
    assert result.output.rstrip().endswith("Serve those environments without --door nemo-gym")
    assert "listening" not in result.output


def test_an_unknown_door_is_named_with_the_close_one() -> None:
    result = runner.invoke(app, ["serve", str(ENVS / "gsm8k.yaml"), "--door", "openenvv", "--port", "0"])
    assert result.exit_code == 1
    assert result.output == "error: unknown door 'openenvv'. Did you mean 'openenv'?\n"


@pytest.mark.parametrize("workers", [1, 2], ids=["one process", "two workers"])
def test_serve_opens_both_doors(workers: int, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from openenv.core.generic_client import GenericEnvClient

    args = [str(ENVS / "gsm8k.yaml"), "--door", "openenv", "--door", "nemo-gym"]
    if workers > 1:
        args += ["--workers", str(workers), "--store", request.getfixturevalue("redis_url")]
    with serve_process(*args, stdout=tmp_path / "out") as (url, _):
        with GenericEnvClient(base_url=f"{url}/openenv").sync() as env:
            first = env.reset(split="test", index=0)
            action = {"type": "call_tool", "tool_name": "submit", "arguments": {"answer": "18"}}
            result = env.step(action)
            assert (result.reward, result.done) == (1.0, True)
        rows = httpx.get(f"{url}/nemo_gym/tasks.jsonl", params={"split": "test", "stop": 1}).json()
        assert rows["envbuilder"]["task_id"] == first.observation["task_id"]
    out = (tmp_path / "out").read_text()
    assert "envbuilder: openenv door at http://127.0.0.1:" in out and "/openenv\n" in out
    assert "envbuilder: nemo-gym door at http://127.0.0.1:" in out
