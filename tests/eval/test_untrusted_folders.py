"""Run folders and output folders are untrusted input: `view`, `eval regrade`, `eval --out`,
`catalog --out/--readme` and `publish` write only regular files they made, never through a link
someone left in the folder (a downloaded runs folder with ``run.html -> ~/.bashrc``), and never
outside the folder (a catalog naming an environment ``../../x``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from tests.catalog.conftest import SQUARES, write_data
from tests.eval.conftest import arithmetic_answer, prompt_of, write_arithmetic
from tests.fakes.chat_server import ChatServer, tool_call_reply

PRECIOUS = "the user's own file\n"


def envbuilder(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envbuilder", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )


def refusal(path: Path, why: str = "it is a symbolic link") -> str:
    return (
        f"error: refusing to write {path}: {why}. Remove it, or write somewhere else (--out); "
        "envbuilder never writes through a link\n"
    )


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A run of `square.yaml` (6 tasks, all right) and its spec."""
    root = tmp_path_factory.mktemp("made")
    folder = write_arithmetic(root / "envs", names=("square",))
    out = root / "run.jsonl"

    def handler(req: dict[str, Any], i: int):
        answer = arithmetic_answer(prompt_of(req))
        return 200, tool_call_reply("submit", json.dumps({"answer": answer})), {}

    with ChatServer(handler) as server:
        result = CliRunner().invoke(
            app, ["eval", str(folder / "square.yaml"), "--model", "m", "--base-url", server.base_url,
                  "--out", str(out)],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out, folder / "square.yaml"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "home" / ".bashrc"
    path.parent.mkdir()
    path.write_text(PRECIOUS)
    return path


@pytest.fixture
def downloaded(made: tuple[Path, Path], tmp_path: Path) -> Path:
    """A runs folder from elsewhere: one run in it, and one in a subfolder."""
    folder = tmp_path / "downloaded"
    (folder / "sub").mkdir(parents=True)
    shutil.copyfile(made[0], folder / "a.jsonl")
    shutil.copyfile(made[0], folder / "sub" / "b.jsonl")
    return folder


@pytest.mark.parametrize("link", ["a.html", "index.html", "sub/b.html"])
def test_view_never_writes_through_a_link_in_the_folder(downloaded: Path, victim: Path, link: str) -> None:
    (downloaded / link).symlink_to(victim)
    result = envbuilder("view", str(downloaded))
    assert (result.returncode, result.stderr) == (1, refusal(downloaded / link))
    assert victim.read_text() == PRECIOUS


def test_view_never_writes_through_a_linked_subfolder(downloaded: Path, victim: Path) -> None:
    """``sub`` replaced by a link to the user's folder after the run was found there."""
    from envbuilder.errors import EnvbuilderError
    from envbuilder.eval._report import write_report

    home = victim.parent
    shutil.copyfile(downloaded / "sub" / "b.jsonl", home / "b.jsonl")
    shutil.rmtree(downloaded / "sub")
    (downloaded / "sub").symlink_to(home, target_is_directory=True)
    with pytest.raises(EnvbuilderError) as info:
        write_report(downloaded / "sub" / "b.jsonl", inside=downloaded)
    assert info.value.code == "unsafe_output"
    assert str(info.value).startswith(
        f"refusing to write {downloaded / 'sub' / 'b.html'}: {downloaded / 'sub'} is a link or not a folder"
    )
    assert sorted(p.name for p in home.iterdir()) == [".bashrc", "b.jsonl"]


def test_view_of_one_run_refuses_a_link_at_its_page(downloaded: Path, victim: Path) -> None:
    (downloaded / "a.html").symlink_to(victim)
    result = envbuilder("view", str(downloaded / "a.jsonl"))
    assert (result.returncode, result.stderr) == (1, refusal(downloaded / "a.html"))
    assert victim.read_text() == PRECIOUS
    (downloaded / "a.html").unlink()
    result = envbuilder("view", str(downloaded / "a.jsonl"))  # a regular file is replaced
    assert result.returncode == 0, result.stderr
    assert (downloaded / "a.html").read_text().startswith("<!doctype html>")
    assert not (downloaded / "a.html").is_symlink()


def test_regrade_never_writes_through_a_link(made: tuple[Path, Path], downloaded: Path, victim: Path) -> None:
    run, spec = made[0], made[1]
    target = downloaded / "a.regraded.jsonl"
    target.symlink_to(victim)
    result = envbuilder("eval", "regrade", str(downloaded / "a.jsonl"), "--spec", str(spec))
    assert (result.returncode, result.stderr) == (1, refusal(target))
    assert victim.read_text() == PRECIOUS
    out = downloaded / "out.jsonl"
    out.symlink_to(victim)
    result = envbuilder("eval", "regrade", str(run), "--spec", str(spec), "--out", str(out))
    assert (result.returncode, result.stderr) == (1, refusal(out))
    assert victim.read_text() == PRECIOUS


def test_eval_out_never_appends_through_a_link(
    made: tuple[Path, Path], downloaded: Path, victim: Path
) -> None:
    out = downloaded / "resumed.jsonl"
    out.symlink_to(victim)
    result = CliRunner().invoke(
        app, ["eval", str(made[1]), "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(out)]
    )
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert refusal(out) in result.output
    assert victim.read_text() == PRECIOUS


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    write_data(tmp_path / "spec")
    path = tmp_path / "spec" / "squares.yaml"
    path.write_text(SQUARES)
    return path


@pytest.mark.parametrize("link", ["index.html", "catalog.json", "env/squares.html"])
def test_catalog_out_never_writes_through_a_link(spec: Path, tmp_path: Path, victim: Path, link: str) -> None:
    out = tmp_path / "site"
    (out / "env").mkdir(parents=True)
    (out / link).symlink_to(victim)
    result = envbuilder("catalog", str(spec), "--out", str(out))
    assert (result.returncode, result.stderr) == (1, refusal(out / link))
    assert victim.read_text() == PRECIOUS


def test_catalog_out_never_writes_into_a_linked_folder(spec: Path, tmp_path: Path, victim: Path) -> None:
    out = tmp_path / "site"
    out.mkdir()
    (out / "env").symlink_to(victim.parent, target_is_directory=True)
    result = envbuilder("catalog", str(spec), "--out", str(out))
    assert result.returncode == 1
    assert result.stderr == refusal(out / "env" / "squares.html", f"{out / 'env'} is a link or not a folder")
    assert sorted(p.name for p in victim.parent.iterdir()) == [".bashrc"]


def test_catalog_readme_never_writes_through_a_link(spec: Path, tmp_path: Path, victim: Path) -> None:
    readme = tmp_path / "README.md"
    readme.symlink_to(victim)
    result = envbuilder("catalog", str(spec), "--readme", str(readme))
    assert (result.returncode, result.stderr) == (1, refusal(readme))
    assert victim.read_text() == PRECIOUS


def test_publish_refuses_a_destination_catalog_that_names_a_path(spec: Path, tmp_path: Path) -> None:
    """The catalog already at the destination is data: an environment called ``../../x`` would
    have its page written two folders above the site."""
    from envbuilder.catalog import build_catalog
    from envbuilder.environment import load_environment

    site = tmp_path / "deep" / "site"
    site.mkdir(parents=True)
    hostile = build_catalog([load_environment(spec)])["environments"][0]
    hostile.update(name="../../escape", versions=[])
    (site / "catalog.json").write_text(json.dumps({"environments": [hostile]}))
    result = envbuilder("publish", str(spec), str(site))
    assert result.returncode == 1
    assert result.stderr == (
        "error: the catalog lists an environment named '../../escape', which is not an environment "
        "name. Names are lowercase letters, digits, `-` and `_`; publish to a clean destination\n"
    )
    assert not list(tmp_path.rglob("escape.html")) and not (site / "env").exists()


def test_view_serve_serves_nothing_a_link_points_to_outside_the_folder(
    downloaded: Path, victim: Path
) -> None:
    (downloaded / "secret.txt").symlink_to(victim)
    (downloaded / "inside.txt").write_text("ours\n")
    (downloaded / "alias.txt").symlink_to(downloaded / "inside.txt")
    proc = subprocess.Popen([sys.executable, "-m", "envbuilder", "view", str(downloaded), "--serve"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 90
        line = ""
        while "serving" not in line and time.monotonic() < deadline:
            line = proc.stderr.readline()
        url = re.search(r"serving (\S+)/index\.html", line)
        assert url, line
        assert httpx.get(f"{url[1]}/index.html", timeout=10).status_code == 200
        assert httpx.get(f"{url[1]}/alias.txt", timeout=10).text == "ours\n"  # a link inside is fine
        refused = httpx.get(f"{url[1]}/secret.txt", timeout=10)
        assert refused.status_code == 404 and PRECIOUS not in refused.text
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
