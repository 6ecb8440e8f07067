"""`serve` starts without cyclic garbage collection and turns it back on before it listens."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner

from envbuilder.cli import app

ROOT = Path(__file__).resolve().parent.parent.parent
runner = CliRunner()


def test_collection_is_on_again_when_uvicorn_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, bool]] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: seen.append(("run", gc.isenabled())))
    import envbuilder.cli._serve as serve_module

    describe = serve_module.describe

    def spying(*args: Any) -> Any:
        seen.append(("start", gc.isenabled()))
        return describe(*args)

    monkeypatch.setattr(serve_module, "describe", spying)
    result = runner.invoke(app, ["serve", str(ROOT / "envs" / "gsm8k.yaml"), "--port", "0"])
    assert result.exit_code == 0, result.output
    assert seen == [("start", False), ("run", True)]
    assert gc.isenabled()


def test_collection_is_on_again_after_serve_fails() -> None:
    result = runner.invoke(app, ["serve", "no/such/spec.yaml"])
    assert result.exit_code == 1
    assert gc.isenabled()


def test_collection_left_off_stays_off() -> None:
    gc.disable()
    try:
        result = runner.invoke(app, ["serve", "no/such/spec.yaml"])
        assert result.exit_code == 1
        assert not gc.isenabled()
    finally:
        gc.enable()
