"""``envbuilder view DIR``: the browser of runs, checked in headless Chromium after its JS ran,
with a screenshot; ``--serve`` serves it."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from tests.catalog.test_site import browse, needs_browser
from tests.eval.conftest import arithmetic_answer, prompt_of, write_arithmetic
from tests.fakes.chat_server import ChatServer, tool_call_reply


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four runs: weak and strong on square (6 tasks), weak on cube, a multi-env folder, and a
    model name that is markup."""
    root = tmp_path_factory.mktemp("browse")
    folder = write_arithmetic(root / "envs")
    out = root / "runs"

    def policy(wrong):
        def handler(req: dict[str, Any], i: int):
            return (
                200,
                tool_call_reply("submit", json.dumps({"answer": arithmetic_answer(prompt_of(req), wrong)})),
                {},
            )

        return handler

    plan = [
        ("weak", "square.yaml", lambda kind, n: n % 2 == 0, out / "weak-square.jsonl"),
        ("strong", "square.yaml", lambda kind, n: False, out / "strong-square.jsonl"),
        ("<b>odd</b>", "cube.yaml", lambda kind, n: n > 3, out / "nested" / "odd-cube.jsonl"),
    ]
    for model, spec, wrong, path in plan:
        with ChatServer(policy(wrong)) as server:
            result = cli(
                "eval",
                str(folder / spec),
                "--model",
                model,
                "--base-url",
                server.base_url,
                "--out",
                str(path),
            )
        assert result.exit_code == 0, result.output
    (out / "notes.jsonl").write_text('{"not": "a run"}\n')  # ignored: no run header
    viewed = cli("view", str(out))
    assert viewed.exit_code == 0, viewed.output
    assert viewed.output == f"envbuilder: 3 run(s) in {out / 'index.html'}\n"
    return out


def ids(dom: str) -> list[tuple[str, bool]]:
    """Run rows in page order: (model, shown)."""
    tags = re.findall(r'<tr class="run"[^>]*>', dom)
    return [(re.findall(r' data-model="([^"]*)"', t)[0], not re.search(r" hidden[ >=]", t)) for t in tags]


def run_id(out: Path, name: str) -> str:
    return json.loads((out / name).read_text().splitlines()[0])["run_id"]


def test_the_index_lists_every_run_escaped_and_self_contained(runs: Path) -> None:
    html = (runs / "index.html").read_text()
    assert "<b>odd</b>" not in html and "&lt;b&gt;odd&lt;/b&gt;" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert 'href="weak-square.html"' in html and 'href="nested/odd-cube.html"' in html
    assert (runs / "nested" / "odd-cube.html").exists()


@needs_browser
def test_filter_and_sort_in_the_browser(runs: Path) -> None:
    index = (runs / "index.html").as_uri()
    dom = browse(index + "#sort=score&desc=1", "--dump-dom")
    # strong 6/6, weak 3/6 (wrong on even n), odd 2/6 (wrong on n > 3)
    assert [m for m, _ in ids(dom)] == ["strong", "weak", "&lt;b&gt;odd&lt;/b&gt;"]
    dom = browse(index + "#sort=model", "--dump-dom")
    assert [m for m, _ in ids(dom)] == ["&lt;b&gt;odd&lt;/b&gt;", "strong", "weak"]
    assert '<th data-sort="model" aria-sort="ascending">' in dom
    assert '<p id="count">3 of 3 runs</p>' in dom
    dom = browse(index + "#env=square", "--dump-dom")
    assert dict(ids(dom)) == {"weak": True, "strong": True, "&lt;b&gt;odd&lt;/b&gt;": False}
    dom = browse(index + "#q=STRONG", "--dump-dom")
    assert dict(ids(dom)) == {"weak": False, "strong": True, "&lt;b&gt;odd&lt;/b&gt;": False}
    assert '<p id="count">1 of 3 runs</p>' in dom


@needs_browser
def test_pick_two_runs_for_a_paired_comparison(runs: Path, tmp_path: Path) -> None:
    weak, strong = run_id(runs, "weak-square.jsonl"), run_id(runs, "strong-square.jsonl")
    index = (runs / "index.html").as_uri()
    dom = browse(index + f"#compare={weak},{strong}", "--dump-dom")
    panel = dom[dom.index('<section id="comparison"') :]
    panel = panel[: panel.index("</section>")]
    assert " hidden" not in panel.split(">")[0]
    assert f"B − A: strong ({strong}) (B) vs weak ({weak}) (A)" in panel
    # weak is wrong on n = 2, 4, 6: paired over 6 tasks, A 0.5, B 1.0
    # per-task differences 0,1,0,1,0,1: mean .5, s.e. sqrt(.3/6), the normal paired interval
    assert (
        "6 tasks graded in both runs: A 0.500, B 1.000, B − A 0.500 [0.062, 0.938] (few: 6 tasks): "
        '<span class="verdict">a real difference at 95%</span>'
    ) in panel
    cube = run_id(runs, "nested/odd-cube.jsonl")
    dom = browse(index + f"#compare={weak},{cube}", "--dump-dom")
    assert "These runs are on different environments: there is no paired comparison." in dom
    shot = tmp_path / "browser.png"
    browse(index + f"#compare={weak},{strong}&sort=score&desc=1", f"--screenshot={shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_an_empty_folder_is_an_error(tmp_path: Path) -> None:
    result = cli("view", str(tmp_path))
    assert result.exit_code == 1
    assert f"error: {tmp_path} holds no results file of `envbuilder eval`" in result.output


def test_a_run_with_no_graded_episode_is_void_not_zero(tmp_path: Path) -> None:
    """Every answer ungradeable (no number in it): the run has no score, and says why."""
    folder = write_arithmetic(tmp_path / "envs")
    out = tmp_path / "runs"

    def handler(req: dict[str, Any], i: int):
        return 200, tool_call_reply("submit", json.dumps({"answer": "I cannot tell."})), {}

    with ChatServer(handler) as server:
        args = ["eval", str(folder / "square.yaml"), "--model", "m", "--base-url", server.base_url]
        result = cli(*args, "--out", str(out / "void.jsonl"))
    assert result.exit_code == 0, result.output
    assert cli("view", str(out)).exit_code == 0
    row = re.search(r'<tr class="run".*?</tr>', (out / "index.html").read_text(), re.S)
    assert row is not None
    assert 'data-score=""' in row.group(0) and "0.000" not in row.group(0)
    assert "void: no episode was graded (6 ungradeable)" in row.group(0)


def test_serve_serves_the_browser(runs: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "envbuilder", "view", str(runs), "--serve"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        line = ""
        while "serving" not in line and time.monotonic() < deadline:
            line = proc.stderr.readline()
        url = re.search(r"serving (\S+)", line)
        assert url, line
        page = httpx.get(url[1], timeout=10)
        assert page.status_code == 200 and "Runs in" in page.text
        assert httpx.get(url[1].replace("index.html", "nested/odd-cube.html"), timeout=10).status_code == 200
    finally:
        proc.terminate()
        proc.communicate(timeout=30)  # also closes the pipes


#: Text that runs script if a page ever puts it into HTML unescaped.
HOSTILE = "<img src=x onerror=document.body.setAttribute('data-pwned','{}')>"


@needs_browser
def test_hostile_folder_names_and_titles_run_no_script_and_make_no_javascript_link(
    runs: Path, tmp_path: Path
) -> None:
    """A downloaded runs folder named to attack the page: a run folder called
    ``javascript:alert(document.domain)``, markup as the root folder's name and the model's."""
    root = tmp_path / HOSTILE.format("folder")
    run = root / "javascript:alert(document.domain)" / "run.jsonl"
    run.parent.mkdir(parents=True)
    header, *rest = (runs / "weak-square.jsonl").read_text().splitlines()
    head = json.loads(header)
    head["run"]["model"] = HOSTILE.format("model")
    run.write_text("\n".join([json.dumps(head), *rest]) + "\n")
    result = cli("view", str(root))
    assert result.exit_code == 0, result.output
    assert 'href="javascript%3Aalert%28document.domain%29/run.html"' in (root / "index.html").read_text()
    for page in (root / "index.html", run.with_suffix(".html")):
        dom = browse(page.as_uri(), "--dump-dom")
        assert not re.search(r"<body[^>]*data-pwned", dom), page  # what the markup would do if it ran
        assert "&lt;img src=x onerror=" in dom, page  # shown as text
        hrefs = [html.unescape(h).strip().lower() for h in re.findall(r'href="([^"]*)"', dom)]
        assert not [h for h in hrefs if h.startswith(("javascript:", "data:", "vbscript:"))], page
    dom = browse((root / "index.html").as_uri(), "--dump-dom")
    assert re.findall(r'<a href="([^"]*)"', dom) == ["javascript%3Aalert%28document.domain%29/run.html"]


def test_comparisons_pair_only_tasks_graded_in_both_runs(tmp_path: Path) -> None:
    """The browser's comparisons are eval compare's: void and errored episodes left out, said."""
    from tests.eval.test_compare import judged_runs

    a, b = judged_runs(tmp_path)
    assert cli("view", str(a.parent)).exit_code == 0
    html = (a.parent / "index.html").read_text()
    found = re.search(r'<script id="data" type="application/json">(.*?)</script>', html, re.S)
    assert found is not None
    comparisons = json.loads(found[1])["comparisons"]
    ids = [json.loads(p.read_text().splitlines()[0])["run_id"] for p in (a, b)]
    c = comparisons[f"{ids[0]},{ids[1]}"]
    assert (c["tasks"], c["a"], c["b"], c["significant"]) == (2, 1.0, 1.0, False)
    assert "3 void, 1 error episodes in B (not graded)" in c["left_out"]


def test_a_run_with_every_episode_void_has_no_score(tmp_path: Path) -> None:
    """A judge down on every task: every episode void, the run is no 0.000."""
    from tests.eval.test_compare import JUDGED, judge, model

    folder = write_arithmetic(tmp_path / "envs", names=("square",))
    spec, out = folder / "square.yaml", tmp_path / "runs"
    with ChatServer(judge({"references": {str(n * n) for n in range(2, 8)}})) as judge_server:
        spec.write_text(JUDGED.format(name="square", extra="", judge=judge_server.base_url))
        with ChatServer(model()) as server:
            result = cli("eval", str(spec), "--model", "m", "--base-url", server.base_url, "--no-cache",
                         "--out", str(out / "void.jsonl"))  # fmt: skip
    assert "void 6" in result.output, result.output
    assert cli("view", str(out)).exit_code == 0
    row = re.search(r'<tr class="run".*?</tr>', (out / "index.html").read_text(), re.S)
    assert row is not None
    assert 'data-score=""' in row.group(0) and "void: no episode was graded (6 void)" in row.group(0)
