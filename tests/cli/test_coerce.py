"""Every command's values convert as typer converts them, without typer's adapters for plain ones.

For each parameter of every command (the whole tree, built as `envbuilder` builds it), generated
values go through the parameter's runtime converter (`cli/_coerce.PlainParam`) and through the one
typer builds itself: both give the same value, or both refuse it with the same message.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envbuilder.cli import app
from envbuilder.cli._coerce import plain_params

pytest.importorskip("typer._coercion", reason="typer before 0.25 converts with click's types")
from typer._coercion import build_runtime_param

ROOT = Path(__file__).resolve().parent.parent.parent


def _params() -> list[tuple[str, Any, Any]]:
    """(command path and parameter name, the parameter, its command) for every typer parameter."""
    found = []

    def walk(command: Any, path: str) -> None:
        for param in command.params:
            if hasattr(param, "type_descriptor"):
                found.append((f"{path} {param.name}", param, command))
        for name in getattr(command, "commands", {}):
            walk(command.commands[name], f"{path} {name}")

    walk(typer.main.get_command(app), "envbuilder")
    return found


PARAMS = _params()
PLAIN = [entry for entry in PARAMS if type(entry[1].get_runtime_param()).__name__ == "PlainParam"]

numerals = st.text(alphabet="0123456789-+._ eE", max_size=8)
scalars = st.one_of(
    st.none(),
    numerals,
    st.text(max_size=6),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.sampled_from(["0", "-0", "1", "65535", "65536", "0.1", "0.09", "1.5", "-1", "10", "inf", "nan"]),
)
values = st.one_of(scalars, st.lists(scalars, max_size=3), st.lists(scalars, max_size=3).map(tuple))


def _outcome(runtime: Any, value: Any, param: Any, ctx: Any) -> tuple[str, Any]:
    try:
        return "value", runtime.coerce(value, param=param, ctx=ctx)
    except Exception as exc:  # the comparison is of whatever each raises
        return type(exc).__name__, str(getattr(exc, "message", exc))


def test_the_plain_parameters_are_most_of_serve_s() -> None:
    serve = [name for name, _, _ in PLAIN if name.startswith("envbuilder serve ")]
    assert len(serve) >= 25, serve  # every str/int/float/list option (the Path ones too: for None)


@pytest.mark.parametrize(("name", "param", "command"), PLAIN, ids=[name for name, _, _ in PLAIN])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=values)
def test_a_value_converts_as_typer_converts_it(name: str, param: Any, command: Any, value: Any) -> None:
    ctx = typer.Context(command)
    ours = param.get_runtime_param()
    typers = build_runtime_param(param.type_descriptor)
    expected = _outcome(typers, value, param, ctx)
    got = _outcome(ours, value, param, ctx)
    assert (got[0], repr(got[1]), type(got[1])) == (expected[0], repr(expected[1]), type(expected[1]))


def test_a_typer_parameter_already_converting_is_left_alone() -> None:
    _, param, _ = PLAIN[0]
    before = param.get_runtime_param()
    plain_params([param])
    assert param.get_runtime_param() is before


def test_serve_builds_no_typer_adapter() -> None:
    """`envbuilder serve` with plain options imports no `typer._adapters` (the pydantic adapters)."""
    probe = (
        "import sys\n"
        "import uvicorn\n"
        "uvicorn.run = lambda *a, **k: None\n"
        "sys.argv = ['envbuilder', 'serve', 'envs/gsm8k.yaml', '--port', '0', '--max-sessions', '10',\n"
        "            '--session-timeout', '60.5', '--api-key', 'k' * 20, '--api-key', 'l' * 20]\n"
        "from envbuilder.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exit:\n"
        "    assert exit.code in (0, None), exit.code\n"
        "print('adapters' if 'typer._adapters' in sys.modules else 'none')\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "none"


def test_a_value_out_of_range_gets_typer_s_panel_and_exit_2() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "envbuilder", "serve", "envs/gsm8k.yaml", "--port", "65536"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "80", "TERM": "dumb", "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.splitlines() == [
        "Usage: python -m envbuilder serve [OPTIONS] {specs}...",
        "Try 'python -m envbuilder serve --help' for help.",
        "╭─ Error ──────────────────────────────────────────────────────────────────────╮",
        "│ Invalid value for '--port': Input should be less than or equal to 65535      │",
        "╰──────────────────────────────────────────────────────────────────────────────╯",
    ]
