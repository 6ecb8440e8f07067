"""The README, the front page, tells the truth: its commands are the ones CI and users run, and
each of its examples prints what it shows. (The manual's pages are tested in tests/docs/.)"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envbuilder import __version__
from envbuilder.cli import app
from tests.docs.pages import blocks, page, section, steps
from tests.processes import wait_healthy
from tests.servers import free_port

ROOT = Path(__file__).parent.parent
README = page("README.md")


def test_readme_has_install_serve_and_test_commands() -> None:
    assert "$ pip install -e . && envbuilder serve envs/gsm8k.yaml" in README
    assert re.search(r"^\$ pip install -e '\.\[dev\]' && python -m pytest$", README, re.M)


def test_readme_is_a_front_page() -> None:
    assert len(README.splitlines()) <= 200


def test_readme_serve_output_matches_the_cli(gsm8k) -> None:
    assert f"envbuilder: serving gsm8k ({gsm8k.summary()} tasks)" in README


def test_version_flag() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"envbuilder {__version__}"


def test_serve_bad_spec_exits_1_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    result = CliRunner().invoke(app, ["serve", str(bad)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "missing required key 'dataset'" in result.output


_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")


def test_readme_curl_walkthrough_is_what_the_server_answers(gsm8k_url: str) -> None:
    import httpx

    sid = ""
    (block, *_) = blocks(section(README, "## One episode with curl"))
    walk = steps(block)
    assert walk[0][0].startswith("curl") and len(walk) == 6
    for command, expected in walk:
        if command.startswith("SID="):
            continue
        words = shlex.split(command.replace("$SID", sid))
        method = words[words.index("-X") + 1] if "-X" in words else "GET"
        url = next(w for w in words if w.startswith("localhost:8080"))
        headers = dict(words[i + 1].split(": ", 1) for i, w in enumerate(words) if w == "-H")
        data = words[words.index("-d") + 1] if "-d" in words else None
        r = httpx.request(method, gsm8k_url + url[len("localhost:8080") :], headers=headers, content=data)
        got = r.text.replace("\r\n", "\n").strip()
        if "create_session" in url:
            sid = _ID.findall(got)[0]
        assert _normal(got) == _normal(expected), command


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in _ID.sub("<id>", text).splitlines())


def test_readme_init_example_is_what_init_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (block,) = blocks(section(README, "## Your own environment"))
    ((command, printed),) = steps(block)
    words = shlex.split(command)
    source = ROOT / words[2]
    (tmp_path / words[2]).parent.mkdir(parents=True)
    (tmp_path / words[2]).write_bytes(source.read_bytes())
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, words[1:])
    assert (result.exit_code, result.output.strip("\n")) == (0, printed)


def test_readme_eval_and_view_print_what_they_show(tmp_path: Path) -> None:
    """The scripted endpoint started as the README says (on a free port), then `eval` and `view`
    exactly as written: the table, the summary and the page (the run id names the endpoint's URL,
    so it is compared for the README's own port only by shape)."""
    (block,) = blocks(section(README, "## Evaluate a model"))
    (endpoint, _), (evaluate, table), (view, viewed) = steps(block)
    port = free_port()
    argv = shlex.split(endpoint.rstrip("& "))
    assert argv[:2] == ["python", "bench/scripted_endpoint.py"] and argv[-2:] == ["--port", "8123"]
    server = subprocess.Popen(
        [sys.executable, *argv[1:-1], str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", server)  # it answers any GET once it listens
        words = shlex.split(evaluate.replace("127.0.0.1:8123", f"127.0.0.1:{port}"))
        out = tmp_path / "runs" / "gsm8k.jsonl"
        words[words.index("--out") + 1] = str(out)
        words[words.index("envs/gsm8k.yaml")] = str(ROOT / "envs" / "gsm8k.yaml")
        result = CliRunner().invoke(app, words[1:])
    finally:
        server.terminate()
        server.wait(15)
    assert result.exit_code == 0, result.output
    expected = table.replace("runs/gsm8k", str(out.with_suffix("")))
    assert _run_id(result.stdout) == _run_id(expected)
    result = CliRunner().invoke(app, [shlex.split(view)[1], str(out)])
    shown = viewed.replace("runs/gsm8k", str(out.with_suffix("")))
    assert (result.exit_code, result.output.strip()) == (0, shown)
    assert out.with_suffix(".html").is_file()


def _run_id(text: str) -> str:
    return re.sub(r"run [0-9a-f]{16}", "run <id>", text.strip())


def test_readme_train_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The TRL example runs as shown (from the repository's root) and prints what its comments say."""
    import contextlib
    import io

    monkeypatch.chdir(ROOT)
    (block,) = blocks(section(README, "## Train"), "python")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README: Train", "exec"), {})
    expected = [m.group(1).strip() for m in re.finditer(r"print\(.*\)[ \t]+# (.+)$", block, re.M)]
    printed = [line.strip() for line in out.getvalue().splitlines()]
    assert expected and all(want in printed for want in expected), (expected, printed)
