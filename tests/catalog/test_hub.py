"""Publishing to a HuggingFace Hub dataset repository through ``huggingface_hub``, against a local
server that records the requests (``tests/fakes/hub_server.py``; what it does not cover is listed
in docs/how-to/catalogs.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from envbuilder.cli import app
from tests.conftest import ENVS
from tests.fakes.hub_server import hub_server

_CHILD = """
import sys
from typer.testing import CliRunner
from envbuilder.cli import app
for args in sys.argv[1:]:
    result = CliRunner().invoke(app, args.split())
    print(f"== exit {result.exit_code}")
    print(result.output)
"""


def _envbuilder(commands: list[str], env: dict[str, str]) -> list[str]:
    """Run the ``envbuilder`` commands in one process of their own (huggingface_hub reads
    HF_ENDPOINT and HF_HUB_OFFLINE when imported); each one's output, after its exit code."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *commands],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split("== ")[1:]


def test_publish_to_the_hub_in_one_commit_then_pull_from_it(tmp_path: Path) -> None:
    with hub_server() as (url, hub):
        env = {
            "HF_ENDPOINT": url,
            "HF_HUB_OFFLINE": "0",
            "HF_TOKEN": "hf_not_a_real_token",
            "HF_HOME": str(tmp_path / "hf"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "ENVBUILDER_CACHE_DIR": str(tmp_path / "cache"),
        }
        spec = str(ENVS / "digits.yaml")
        publish = f"publish {spec} hf://datasets/me/envs"
        first, again, pulled = _envbuilder(
            [publish, publish, "pull hf://datasets/me/envs/catalog.json --env digits@1"], env
        )
        assert first.startswith("exit 0") and "5 file(s) uploaded" in first, first
        assert "envbuilder serve hf://datasets/me/envs/catalog.json" in first
        assert again.startswith("exit 0") and "0 file(s) uploaded, 5 unchanged" in again, again
        (commit,) = hub.commits  # one commit, and none for the unchanged second publish
        assert commit[-1] == "catalog.json" and commit[0].startswith("packs/digits/digits-1-")
        assert ("POST", "/api/datasets/me/envs/commit/main") in hub.requests
        assert (
            b'"serve": "envbuilder serve hf://datasets/me/envs/catalog.json --env digits@1"'
            in (hub.files["me/envs"]["catalog.json"])
        )
        assert pulled.startswith("exit 0") and "pulled digits@1 into" in pulled and "(verified)" in pulled


def test_a_hub_destination_must_be_a_dataset_repository() -> None:
    result = CliRunner().invoke(app, ["publish", str(ENVS / "digits.yaml"), "hf://me/envs"])
    assert result.exit_code == 1
    assert "cannot publish to 'hf://me/envs': a Hub destination is a dataset repository" in result.output
    assert "Write hf://datasets/OWNER/NAME" in result.output
