"""``envbuilder export verifiers|harbor SPEC OUT``: the folder to write as OUT or ``--out``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from tests.conftest import ENVS

CASES = {"verifiers": "gsm8k.yaml", "harbor": "humaneval.yaml"}


def export(*args: str):
    return CliRunner().invoke(app, ["export", *args])


@pytest.mark.parametrize("kind", sorted(CASES))
@pytest.mark.parametrize("how", ["OUT", "--out", "-o", "both, the same"])
def test_the_folder_is_out_or_the_out_option(kind: str, how: str, tmp_path: Path) -> None:
    spec, out = str(ENVS / CASES[kind]), tmp_path / "out"
    args = {
        "OUT": [str(out)],
        "--out": ["--out", str(out)],
        "-o": ["-o", str(out)],
        "both, the same": [str(out), "--out", str(out)],
    }[how]
    extra = ["--limit", "1"] if kind == "harbor" else []
    result = export(kind, spec, *args, *extra)
    assert result.exit_code == 0, result.output
    assert f"into {out}" in result.output and any(out.iterdir())


@pytest.mark.parametrize("kind", sorted(CASES))
def test_no_folder_or_two_are_refused_before_anything_is_written(kind: str, tmp_path: Path) -> None:
    spec = str(ENVS / CASES[kind])
    none = export(kind, spec)
    assert none.exit_code == 2 and "give the folder to write, as OUT or --out" in none.output
    two = export(kind, spec, str(tmp_path / "a"), "--out", str(tmp_path / "b"))
    assert two.exit_code == 2 and "two folders to write" in " ".join(two.output.split())
    assert list(tmp_path.iterdir()) == []
