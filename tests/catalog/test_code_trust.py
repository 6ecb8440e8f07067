"""Code in a spec runs only when the user says so: a pack, a catalog's environment or a spec in the
cache never imports its `function` module nor starts its `mcp` command without --trust-code or a
signature the operator's key verifies; a spec in the user's own folder runs it as before.

Each refusal is checked with a module whose import, and a command whose start, writes a marker
file: the marker must not exist afterwards."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from envbuilder import paths
from envbuilder.catalog import open_pack, pack, publish
from envbuilder.cli import app
from envbuilder.environment import Environment, load_environment
from envbuilder.errors import SpecError
from envbuilder.spec import parse_spec
from tests.catalog.test_pull import keys  # noqa: F401 - the signing keys fixture
from tests.conftest import ENVS, ROOT
from tests.processes import serve_process

MARKER = "ENVBUILDER_TEST_MARKER"
PRELUDE = f"""\
import os
import pathlib

if os.environ.get({MARKER!r}):
    pathlib.Path(os.environ[{MARKER!r}]).write_text("ran")
"""
SHOP = (
    PRELUDE
    + '''

def lookup(state, key: str) -> str:
    """The value under a key of the shop's records.

    Args:
        key: The record's key.
    """
    return str(state.get(key))
'''
)
COMMON = """\
version: "1"
dataset: {type: jsonl, files: {test: tasks.jsonl}}
splits: {test: {type: test}}
prompt: {template: "{{ question }}"}
grader: {type: exact_match, target: "{{ answer }}"}
state: {file: db.json}
"""
FUNCTION_SPEC = "name: shop\n" + COMMON + "tools:\n  - {type: function, name: lookup, module: shop.py}\n"
# The server's script is named by its absolute path: a pack carries the files loading reads, and
# a command's files are not among them.
MCP_SPEC = "name: weather\n" + COMMON + "tools:\n  - {type: mcp, command: [%s, %s], prefix: w_}\n"
# The key each kind names its code with, and the line and column of that key in the spec file.
KINDS = {"shop": ("module", "9:44"), "weather": ("command", "9:26")}


def write_source(folder: Path) -> Path:
    """Both specs, their data, the module and the MCP server, in a folder of the user's own."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tasks.jsonl").write_text('{"question": "2+2?", "answer": "4"}\n')
    (folder / "db.json").write_text('{"a": 1}\n')
    (folder / "shop.py").write_text(SHOP)
    server = (ROOT / "tests" / "agents" / "data" / "mcp_weather.py").read_text()
    (folder / "server.py").write_text(PRELUDE + server.replace("from __future__ import annotations\n", ""))
    (folder / "shop.yaml").write_text(FUNCTION_SPEC)
    (folder / "weather.yaml").write_text(MCP_SPEC % (sys.executable, folder / "server.py"))
    return folder


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_source(tmp_path_factory.mktemp("own") / "src")


@pytest.fixture(scope="module")
def packs(source: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A pack of each spec, made from the user's own folder (its code ran then, unmarked)."""
    assert MARKER not in os.environ
    out = tmp_path_factory.mktemp("packs")
    return {name: pack(source / f"{name}.yaml", out / f"{name}.zip").path for name in KINDS}


def envbuilder(*args: str, marker: Path) -> tuple[int, str]:
    """The real CLI in a subprocess, with the marker variable set: its exit code and output."""
    done = subprocess.run(
        [sys.executable, "-m", "envbuilder", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, MARKER: str(marker), "COLUMNS": "300"},
    )
    return done.returncode, done.stdout + done.stderr


def in_process(*args: str) -> tuple[int, str]:
    """The CLI in this process (its exit code and output): a refusal never gets as far as an
    exception, and an import here would write the marker just the same."""
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def refused(result: tuple[int, str], name: str, origin: str = "comes from a pack") -> None:
    code, output = result
    key, where = KINDS[name]
    assert code == 1, output
    assert "Traceback" not in output
    assert f"{name}.yaml:{where} tools[0].{key}: this spec {origin}" in output, output
    assert "refusing to run code from it before you say so. Pass --trust-code" in output, output


@pytest.mark.parametrize("name", sorted(KINDS))
def test_serving_a_pack_refuses_its_code_before_it_runs(
    name: str, packs: dict[str, Path], tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    result = envbuilder("serve", str(packs[name]), "--port", "0", marker=marker)
    refused(result, name)
    assert f"error: {packs[name]} was not loaded:" in result[1]
    assert not marker.exists()


@pytest.mark.parametrize("name", sorted(KINDS))
def test_validate_and_catalog_refuse_a_packs_code(
    name: str, packs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "marker"
    validated = envbuilder("validate", str(packs[name]), marker=marker)
    refused(validated, name)
    assert validated[1].endswith(f"{packs[name]}: 1 problem\n")
    monkeypatch.setenv(MARKER, str(marker))
    refused(in_process("catalog", str(packs[name])), name)
    refused(in_process("catalog", str(packs[name]), "--out", str(tmp_path / "site")), name)
    assert not marker.exists() and not (tmp_path / "site").exists()


def test_every_command_that_loads_a_spec_refuses_an_extracted_packs_code(
    packs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same spec, named inside the cache where its pack was extracted, or as the pack."""
    marker = tmp_path / "marker"
    monkeypatch.setenv(MARKER, str(marker))
    cached = open_pack(packs["shop"], cache_dir=tmp_path / "cache")
    model = ["--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
    commands = [
        ["check", str(packs["shop"])],
        ["check", str(cached)],
        ["validate", str(cached)],
        ["preview", str(cached)],
        ["mcp", str(cached)],
        ["pack", str(cached), "--out", str(tmp_path / "again.zip")],
        ["publish", str(cached), str(tmp_path / "site")],
        ["profile", str(cached), *model, "--out", str(tmp_path / "profile.jsonl")],
        ["eval", "regrade", str(tmp_path / "run.jsonl"), "--spec", str(cached)],
        ["eval", str(packs["shop"]), *model],
        ["eval", str(cached), *model],
    ]
    for command in commands:
        refused(in_process(*command), "shop")
    assert not marker.exists()
    assert not (tmp_path / "again.zip").exists() and not (tmp_path / "profile.jsonl").exists()


def test_a_published_catalog_is_not_the_users_own_folder(source: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    publish([source / "shop.yaml"], str(site))
    marker = tmp_path / "marker"
    refused(envbuilder("serve", str(site / "catalog.json"), "--port", "0", marker=marker), "shop")
    assert not marker.exists()


def test_trust_code_lets_a_pack_run_its_code(packs: dict[str, Path], tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    with serve_process(str(packs["shop"]), "--trust-code", env={MARKER: str(marker)}) as (url, _):
        tools = httpx.get(f"{url}/shop/tools", timeout=10).json()["tools"]
    assert [t["name"] for t in tools] == ["submit", "lookup"]
    assert marker.read_text() == "ran"


def test_a_pack_signed_by_the_trusted_key_runs_its_code(
    source: Path,
    tmp_path: Path,
    keys: dict[str, Path],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    site = tmp_path / "site"
    publish([source / "shop.yaml"], str(site), sign_key=keys["publisher"])
    signed = site / json.loads((site / "catalog.json").read_text())["environments"][0]["pack"]["path"]
    marker = tmp_path / "marker"
    monkeypatch.setenv(MARKER, str(marker))
    monkeypatch.setenv("ENVBUILDER_CACHE_DIR", str(tmp_path / "cache"))  # a module path of its own
    code, output = in_process("validate", str(signed), "--trusted-key", str(keys["stranger.pub"]))
    assert code == 1 and "the signature over its lock does not verify" in output
    refused(in_process("validate", str(signed)), "shop")  # no key: a pack like any other
    assert not marker.exists()
    assert in_process("validate", str(signed), "--trusted-key", str(keys["publisher.pub"])) == (
        0,
        f"{signed}: valid (test 1 tasks)\n",
    )
    assert marker.read_text() == "ran"
    marker.unlink()
    key = ["--trusted-key", str(keys["publisher.pub"])]
    with serve_process(str(site / "catalog.json"), *key, env={MARKER: str(marker)}) as (url, _):
        assert httpx.get(f"{url}/shop/tools", timeout=10).status_code == 200
    assert marker.read_text() == "ran"


def test_the_users_own_folder_runs_its_code_without_a_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_source(tmp_path / "mine")  # modules of their own paths: imported afresh
    marker = tmp_path / "marker"
    monkeypatch.setenv(MARKER, str(marker))
    code, output = in_process("validate", str(folder / "shop.yaml"))
    assert (code, output) == (0, f"{folder / 'shop.yaml'}: valid (test 1 tasks)\n")
    assert marker.read_text() == "ran"
    marker.unlink()
    code, output = in_process("validate", str(folder / "weather.yaml"))  # the command starts
    assert code == 0, output
    assert marker.read_text() == "ran"


def test_the_shipped_tau2_retail_serves_from_a_clone_without_a_flag() -> None:
    with serve_process(str(ENVS / "tau2_retail.yaml")) as (url, _):
        tools = httpx.get(f"{url}/tau2_retail/tools", timeout=10).json()["tools"]
    assert "get_order_details" in {t["name"] for t in tools}


def test_a_spec_copied_into_the_cache_folder_is_not_the_users_own(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVBUILDER_CACHE_DIR", str(cache))
    copy = Path(shutil.copytree(source, cache / "filters" / "src"))
    marker = tmp_path / "marker"
    monkeypatch.setenv(MARKER, str(marker))
    with pytest.raises(SpecError) as info:
        load_environment(copy / "shop.yaml")
    assert [p.code for p in info.value.problems] == ["code_not_trusted"]
    assert str(info.value.problems[0]) == (
        f"{copy / 'shop.yaml'}:9:44 tools[0].module: this spec lies in envbuilder's cache folder "
        f"({cache}), not in your own folders, and its `function` tool imports and runs the Python "
        "module 'shop.py': refusing to run code from it before you say so. Pass --trust-code "
        "(trust_code=True in Python) if you trust its source and want its code to run; a pack whose "
        "signature verifies with a key you pass as --trusted-key is trusted too"
    )
    assert not marker.exists()
    assert load_environment(copy / "shop.yaml", trust_code=True).name == "shop"
    assert marker.read_text() == "ran"


def test_trust_code_false_refuses_even_the_users_own_folder(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "marker"
    monkeypatch.setenv(MARKER, str(marker))
    folder = write_source(tmp_path / "mine")  # a module of its own path: imported afresh
    text = FUNCTION_SPEC
    with pytest.raises(SpecError, match=r"shop\.yaml:9:44 tools\[0\]\.module: this spec was loaded with "):
        Environment(parse_spec(text, file="shop.yaml", base_dir=folder), trust_code=False)
    assert not marker.exists()
    Environment(parse_spec(text, file="shop.yaml", base_dir=folder))
    assert marker.read_text() == "ran"


def test_validate_lists_the_refusal_with_every_other_problem(
    packs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An untrusted spec with a mistake elsewhere: both are reported, its code never runs."""
    folder = open_pack(packs["shop"], cache_dir=tmp_path / "cache").parent
    spec = folder / "shop.yaml"
    spec.chmod(0o644)
    spec.write_text(spec.read_text().replace("{{ answer }}", "{{ answr }}"))  # now unlike its lock
    marker = tmp_path / "marker"
    monkeypatch.setenv(MARKER, str(marker))
    code, output = in_process("validate", str(spec))
    assert code == 1
    lines = [line for line in output.splitlines() if line.startswith(str(spec))]
    assert [line.split(": ")[0] for line in lines] == [
        f"{spec}:6:37 grader.target",
        f"{spec}:9:44 tools[0].module",
        f"{spec}",
    ]
    assert not marker.exists()


def test_a_pack_cache_is_recognised_wherever_it_is(
    packs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--cache-dir elsewhere: the extracted pack is still a pack (its lock marks it)."""
    cached = open_pack(packs["shop"], cache_dir=tmp_path / "elsewhere")
    assert (cached.parent / paths.PACK_LOCK_NAME).is_file()
    assert not cached.is_relative_to(paths.cache_dir())
    marker = tmp_path / "marker"
    monkeypatch.setenv(MARKER, str(marker))
    refused(in_process("validate", str(cached)), "shop")
    assert not marker.exists()


def test_workers_load_a_trusted_pack_as_the_supervisor_did(
    source: Path,
    tmp_path: Path,
    keys: dict[str, Path],  # noqa: F811 - the fixture
    redis_url: str,
) -> None:
    """Each worker process loads the specs again: the pack whose signature verified, and one
    trusted by --trust-code, run their code there too (else every worker would refuse them)."""
    site = tmp_path / "site"
    publish([source / "shop.yaml"], str(site), sign_key=keys["publisher"])
    signed = site / json.loads((site / "catalog.json").read_text())["environments"][0]["pack"]["path"]
    workers = ["--workers", "2", "--store", redis_url]
    marker = tmp_path / "marker"
    key = ["--trusted-key", str(keys["publisher.pub"])]
    with serve_process(str(signed), *key, *workers, env={MARKER: str(marker)}) as (url, _):
        for _ in range(4):  # whichever worker answers
            assert [t["name"] for t in httpx.get(f"{url}/shop/tools", timeout=10).json()["tools"]] == [
                "submit",
                "lookup",
            ]
    assert marker.read_text() == "ran"
