"""``envbuilder serve`` with folders and several specs: every good spec served, failures reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from envbuilder.catalog import find_specs, load_environments
from envbuilder.cli import app
from envbuilder.errors import SpecError
from tests.catalog.conftest import SQUARES
from tests.conftest import ENVS


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Captures the app ``envbuilder serve`` would run instead of starting uvicorn."""
    import uvicorn

    apps: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: apps.append(app))
    return apps


def test_find_specs_takes_only_top_level_yaml(specs_dir: Path) -> None:
    assert [p.name for p in find_specs([specs_dir])] == ["broken.yaml", "capitals.yaml", "squares.yml"]


def test_a_folder_is_served_and_the_broken_spec_reported(specs_dir: Path, served: list[Any]) -> None:
    result = CliRunner().invoke(app, ["serve", str(specs_dir)])
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        f"error: {specs_dir / 'broken.yaml'} was not loaded:\n"
        f"{specs_dir / 'broken.yaml'}:11:3 grader.type: unknown type 'exact_mach' "
        "Did you mean 'exact_match'?\n"
    )
    assert result.stdout.splitlines() == [
        "envbuilder: serving capitals (test 3 tasks)",
        "envbuilder: serving squares (train 4 tasks)",
        "envbuilder: listening on http://127.0.0.1:8080  (try: curl http://127.0.0.1:8080/capitals/splits)",
    ]
    client = TestClient(served[0])
    assert client.get("/list_environments").json() == ["capitals", "squares"]
    assert client.post("/squares/num_tasks", json={"split": "train"}).json() == {"num_tasks": 4}
    redirect = client.get("/splits", follow_redirects=False)
    assert (redirect.status_code, redirect.headers["location"]) == (308, "/capitals/splits")


def test_strict_makes_a_failure_fatal(specs_dir: Path, served: list[Any]) -> None:
    result = CliRunner().invoke(app, ["serve", "--strict", str(specs_dir)])
    assert result.exit_code == 1
    assert "broken.yaml:11:3 grader.type: unknown type 'exact_mach'" in result.stderr
    assert result.stderr.endswith("error: 1 failed to load (--strict)\n")
    assert served == []


def test_several_spec_files_the_first_is_the_default(specs_dir: Path, served: list[Any]) -> None:
    result = CliRunner().invoke(
        app, ["serve", str(specs_dir / "squares.yml"), str(ENVS / "gsm8k.yaml"), "--strict"]
    )
    assert result.exit_code == 0, result.output
    client = TestClient(served[0])
    assert client.get("/list_environments").json() == ["squares", "gsm8k"]
    assert client.get("/tools", follow_redirects=False).headers["location"] == "/squares/tools"


def test_nothing_loaded_exits_1(specs_dir: Path, served: list[Any]) -> None:
    result = CliRunner().invoke(app, ["serve", str(specs_dir / "broken.yaml")])
    assert result.exit_code == 1
    assert result.stderr.endswith("error: no environment loaded\n")
    assert served == []


def test_a_folder_without_specs_is_an_error(tmp_path: Path, served: list[Any]) -> None:
    result = CliRunner().invoke(app, ["serve", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {tmp_path}: the folder holds no *.yaml or *.yml spec. "
        "Give a folder of specs, spec files, or .zip packs\n"
    )


def test_duplicate_names_are_a_located_error(specs_dir: Path, served: list[Any]) -> None:
    twin = specs_dir / "zz-twin.yaml"
    twin.write_text(SQUARES)
    with pytest.raises(SpecError) as info:
        load_environments([specs_dir])
    assert str(info.value) == (
        f"{twin}:1:7 name: environment name 'squares' is already used by {specs_dir / 'squares.yml'}. "
        "Each environment a server serves needs its own `name:`"
    )
    result = CliRunner().invoke(app, ["serve", str(specs_dir)])
    assert result.exit_code == 1
    assert f"error: {info.value}\n" in result.stderr
    assert served == []


def test_serving_one_spec_still_works(served: list[Any]) -> None:
    result = CliRunner().invoke(app, ["serve", str(ENVS / "gsm8k.yaml"), "--port", "9000"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("envbuilder: serving gsm8k (train 7,473 / test 1,319 tasks)\n")
    assert TestClient(served[0]).get("/list_environments").json() == ["gsm8k"]


def test_a_plugin_crash_is_reported_not_raised(specs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import envbuilder.catalog._collect as collect

    real = collect.load_environment

    def load(path: Path, **options: Any) -> Any:
        if path.name == "capitals.yaml":
            raise KeyError("oops")
        return real(path, **options)

    monkeypatch.setattr(collect, "load_environment", load)
    loaded = load_environments([specs_dir])
    assert [e.name for e in loaded.envs] == ["squares"]
    assert [str(f) for f in loaded.failures][1] == (
        f"{specs_dir / 'capitals.yaml'} was not loaded: unexpected KeyError: 'oops'"
    )
