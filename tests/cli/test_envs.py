"""Every shipped spec under envs/ validates and checks clean (new specs are covered by the glob)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from tests.conftest import ENVS

SPECS = sorted(ENVS.glob("*.yaml"))
runner = CliRunner()


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.name)
def test_spec_validates_and_checks_clean(spec: Path) -> None:
    result = runner.invoke(app, ["validate", str(spec)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["check", str(spec), "--sample", "10"])
    assert result.exit_code == 0, result.output
