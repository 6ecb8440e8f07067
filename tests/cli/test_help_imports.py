"""What a help page imports and how it is built: only what the command needs, the same command tree.

`envbuilder --help` and `envbuilder CMD --help` run in a fresh interpreter and read
``sys.modules`` (speed itself is measured by bench/startup.py, not here). The commands are
registered by name and built on first use (cli/_lazy.py), and help is written without rich
(cli/_help.py); the tests below check that this changes nothing a user sees but the help's layout.
"""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from envbuilder.cli import COMMANDS, app
from envbuilder.cli._help import Command, Group, plain, summary

ROOT = Path(__file__).resolve().parent.parent.parent

# Imported by rich's help (rich's Markdown pulls markdown-it and pygments), by typer's value
# conversion (pydantic), or by the library the commands call.
NOT_ON_THE_HELP_PATH = (
    "rich",
    "markdown_it",
    "pygments",
    "pydantic",
    "httpx",
    "datasets",
    "pyarrow",
    "fastapi",
    "uvicorn",
    "yaml",
    "jinja2",
    "asyncio",
)
COMMAND_MODULES = sorted({target.partition(":")[0] for target in COMMANDS.values()})


def _imported_by(*args: str) -> set[str]:
    """The modules loaded after `envbuilder ARGS` ran in a fresh interpreter (it must exit 0)."""
    probe = (
        "import contextlib, io, json, sys\n"
        f"sys.argv = ['envbuilder', *{list(args)!r}]\n"
        "from envbuilder.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit as e:\n"
        "        assert e.code in (0, None), (e.code, out.getvalue())\n"
        "assert 'Usage:' in out.getvalue(), out.getvalue()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode == 0, run.stderr
    return set(json.loads(run.stdout.strip().splitlines()[-1]))


def _heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in NOT_ON_THE_HELP_PATH}


def test_help_imports_no_rich_no_pydantic_and_nothing_the_commands_call() -> None:
    modules = _imported_by("--help")
    assert _heavy(modules) == set()
    # the command modules, for their summaries, and nothing of the library below them
    assert {
        m for m in modules if m.startswith("envbuilder.") and m.split(".")[:2] != ["envbuilder", "cli"]
    } == {
        "envbuilder._version",
        "envbuilder.errors",
    }


@pytest.mark.parametrize(
    ("args", "module"),
    [
        (("serve", "--help"), "envbuilder.cli._serve"),
        (("eval", "--help"), "envbuilder.cli._eval_group"),
        (("eval", "compare", "--help"), "envbuilder.cli._eval_group"),
        (("cache", "show", "--help"), "envbuilder.cli._cache"),
    ],
)
def test_a_command_s_help_imports_that_command_only(args: tuple[str, ...], module: str) -> None:
    modules = _imported_by(*args)
    assert _heavy(modules) == set()
    # the command's module, and _pull, which holds the options several commands share
    assert module in modules
    assert {m for m in COMMAND_MODULES if m in modules} - {module} <= {"envbuilder.cli._pull"}


def _walk(command: Any, path: tuple[str, ...] = ("envbuilder",)) -> list[tuple[tuple[str, ...], Any]]:
    found = [(path, command)]
    for name in getattr(command, "commands", {}):
        found += _walk(command.commands[name], (*path, name))
    return found


def test_every_command_writes_its_help_without_rich() -> None:
    for path, command in _walk(typer.main.get_command(app)):
        assert isinstance(command, Group if hasattr(command, "commands") else Command), path


def _describe(command: Any) -> list[Any]:
    """Everything of a command a user can see or call: its help and every parameter."""
    params = [
        (p.name, p.opts, p.secondary_opts, getattr(p, "help", None), p.required, repr(p.default), p.nargs,
         p.envvar, getattr(p, "is_flag", False), p.is_eager, p.hidden if hasattr(p, "hidden") else None)
        for p in command.params
    ]  # fmt: skip
    return [command.name, command.help, command.short_help, command.hidden, command.no_args_is_help, params]


def test_the_lazy_tree_is_the_tree_the_app_would_build_eagerly() -> None:
    """Registering each command on a plain Typer, as the app did before it became lazy, gives the
    same commands, in the same order, with the same help and parameters."""
    eager = typer.Typer(
        name="envbuilder", no_args_is_help=True, rich_markup_mode="markdown", add_completion=False
    )
    eager.callback()(app.registered_callback.callback)  # type: ignore[union-attr]
    for name, target in COMMANDS.items():
        module, _, attribute = target.partition(":")
        obj = getattr(importlib.import_module(module), attribute)
        if isinstance(obj, typer.Typer):
            eager.add_typer(obj, name=name)
        else:
            eager.command(name)(obj)
    lazy_tree = _walk(typer.main.get_command(app))
    eager_tree = _walk(typer.main.get_command(eager))
    assert [path for path, _ in lazy_tree] == [path for path, _ in eager_tree]
    for (path, lazy), (_, built) in zip(lazy_tree, eager_tree, strict=True):
        assert _describe(lazy) == _describe(built), path


def test_the_root_help_reads_each_summary_without_building_the_command() -> None:
    group = typer.main.get_command(app)
    unbuilt = [group.table.describe(name) for name in COMMANDS]  # type: ignore[attr-defined]
    assert not group.table._built  # type: ignore[attr-defined]
    built = [
        (summary(c.help, c.short_help), bool(c.hidden)) for c in map(group.commands.__getitem__, COMMANDS)
    ]  # type: ignore[attr-defined]
    assert unbuilt == built


def test_the_help_shows_every_option_and_its_whole_help_text() -> None:
    runner = CliRunner()
    for path, command in _walk(typer.main.get_command(app)):
        result = runner.invoke(app, [*path[1:], "--help"], env={"COLUMNS": "2000", "NO_COLOR": "1"})
        assert result.exit_code == 0, result.output
        text = result.output
        assert "╭" not in text and "Usage: " in text
        if command.help:
            for paragraph in inspect.cleandoc(command.help).split("\n\n"):
                assert " ".join(plain(paragraph).split()) in text, (path, paragraph)
        for param in command.params:
            if getattr(param, "hidden", False):
                continue
            if param.param_type_name == "option":
                assert param.opts[0] in text, (path, param.name)
            if getattr(param, "help", None):
                assert " ".join(plain(param.help).split()) in text, (path, param.name)


def test_no_arguments_print_the_help_to_stdout_and_exit_2() -> None:
    for args in ([], ["eval"], ["export"]):
        run = subprocess.run(
            [sys.executable, "-m", "envbuilder", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 2, run
        assert run.stdout.startswith("Usage: ") and "Commands:" in run.stdout, run.stdout
        assert run.stderr == ""


def test_a_bad_option_s_error_is_typer_s_own() -> None:
    """Errors still go through typer's rich error panel, unchanged: only help pages lost rich."""
    run = subprocess.run(
        [sys.executable, "-m", "envbuilder", "serve", "--bogus"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "80", "TERM": "dumb", "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.splitlines()[:2] == [
        "Usage: python -m envbuilder serve [OPTIONS] {specs}...",
        "Try 'python -m envbuilder serve --help' for help.",
    ]
    assert "╭─ Error ─" in run.stderr
    assert "No such option: --bogus (Possible options: --host)" in run.stderr
    typo = subprocess.run(
        [sys.executable, "-m", "envbuilder", "serv"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert typo.returncode == 2 and "No such command 'serv'. Did you mean 'serve'?" in typo.stderr
