"""`envbuilder --help` and each command's help: no type label on flags, no hard line breaks."""

from __future__ import annotations

import inspect

import pytest
import typer.main
from typer.testing import CliRunner

from envbuilder.cli import app

runner = CliRunner()
COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def _help(*args: str) -> str:
    result = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output


def test_the_command_list_shows_each_summary_on_one_line() -> None:
    text = _help()
    group = typer.main.get_command(app)
    for name in COMMANDS:
        summary = inspect.cleandoc(group.commands[name].help or "").split("\n\n")[0]  # type: ignore[attr-defined]
        assert "\n" not in summary, f"{name}: the summary paragraph has a hard line break"
        rows = [line for line in text.splitlines() if f" {name} " in line]
        assert any(summary.replace("`", "") in row for row in rows), (name, rows)
    assert "<bool>" not in text


@pytest.mark.parametrize("command", COMMANDS)
def test_flags_carry_no_type_label(command: str) -> None:
    text = _help(command)
    assert "<bool>" not in text
    assert "--help  " in text.replace("│", " ")
