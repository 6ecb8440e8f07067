"""``envbuilder view``: the run's page, checked in headless Chromium after its JS ran."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from tests.catalog.test_site import browse, needs_browser
from tests.conftest import ENVS
from tests.eval.conftest import question, submit
from tests.fakes.chat_server import ChatServer, reply


@pytest.fixture(scope="module")
def report(answers, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of 4 tasks: right, wrong, one that never answers, one the endpoint refuses."""

    def handler(req: dict[str, Any], i: int):
        index, gold = question(req, answers)
        if index == 2:
            return 200, reply("I <b>refuse</b> to use tools"), {}
        if index == 3:
            return 400, {"error": {"message": "context too long"}}, {}
        return submit(gold if index == 0 else "-1")

    out = tmp_path_factory.mktemp("run") / "run.jsonl"
    with ChatServer(handler) as server:
        result = CliRunner().invoke(
            app,
            [
                "eval",
                str(ENVS / "gsm8k.yaml"),
                "--model",
                "m",
                "--base-url",
                server.base_url,
                "--limit",
                "4",
                "--max-turns",
                "2",
                "--out",
                str(out),
                "--max-errors",
                "1",
            ],
        )
    assert result.exit_code == 0, result.output
    viewed = CliRunner().invoke(app, ["view", str(out), "--group-by", "id"])
    assert viewed.exit_code == 0, viewed.output
    assert viewed.output == f"envbuilder: 4 episodes in {out.with_suffix('.html')}\n"
    return out.with_suffix(".html")


def shown(dom: str) -> dict[str, bool]:
    """Episode element id → whether it is shown."""
    tags = re.findall(r'<details class="episode"[^>]*>', dom)
    return {re.findall(r' id="([^"]+)"', t)[0]: not re.search(r" hidden[ >=]", t) for t in tags}


def test_the_page_is_self_contained_and_escaped(report: Path) -> None:
    html = report.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "<link" not in html and "<script src" not in html
    assert "I <b>refuse</b>" not in html and "I &lt;b&gt;refuse&lt;/b&gt; to use tools" in html


@needs_browser
def test_the_page_shows_the_summary_and_every_episode(report: Path) -> None:
    dom = browse(report.as_uri(), "--dump-dom")
    assert shown(dom) == {"ep-0-0": True, "ep-1-0": True, "ep-2-0": True, "ep-3-0": True}
    assert '<p id="count">4 of 4 episodes</p>' in dom
    assert "correct 1</span>" in dom and "no answer 1</span>" in dom and "error 1</span>" in dom
    assert "HTTP 400: 1" in dom  # errors by reason
    assert "<th>mean reward, all 4 episodes (none = 0)</th><td>0.250 [" in dom
    assert "<th>Mean reward, 2 graded episodes</th><td>0.500 [" in dom
    assert "<h2>By <code>id</code></h2>" in dom and "<td>test-0</td>" in dom


@needs_browser
def test_filter_by_outcome_and_open_a_transcript(report: Path) -> None:
    dom = browse(report.as_uri() + "#outcome=incorrect&open=ep-1-0", "--dump-dom")
    assert shown(dom) == {"ep-0-0": False, "ep-1-0": True, "ep-2-0": False, "ep-3-0": False}
    assert '<p id="count">1 of 4 episodes</p>' in dom
    assert re.search(r'data-outcome="incorrect" aria-pressed="true"', dom)
    episode = dom[dom.index('id="ep-1-0"') :]
    episode = episode[: episode.index("</details>")]
    assert episode.startswith('id="ep-1-0" open=""')
    assert "A robe takes 2 bolts of blue fiber" in episode  # the prompt
    assert '<p class="call">calls <code>submit</code></p><pre>{"answer": "-1"}</pre>' in episode
    metadata = re.search(r'<pre class="metadata">(.*?)</pre>', episode, re.S)
    assert (
        metadata is not None
        and json.loads(metadata.group(1).replace("&quot;", '"'))["outcome"] == "incorrect"
    )


@needs_browser
def test_search_finds_words_in_transcripts(report: Path) -> None:
    dom = browse(report.as_uri() + "?q=refuse%20TOOLS", "--dump-dom")
    assert shown(dom) == {"ep-0-0": False, "ep-1-0": False, "ep-2-0": True, "ep-3-0": False}
    dom = browse(report.as_uri() + "#q=context%20too%20long&outcome=error", "--dump-dom")
    assert shown(dom) == {"ep-0-0": False, "ep-1-0": False, "ep-2-0": False, "ep-3-0": True}
    dom = browse(report.as_uri() + "#q=nothing-matches-this", "--dump-dom")
    assert not any(shown(dom).values()) and '<p id="none">No episode matches.</p>' in dom


def test_the_page_labels_the_mean_over_all_as_eval_prints_it(tmp_path: Path) -> None:
    """6 episodes, 3 of them void: the mean is over 3, and both say so in the same words."""
    from tests.eval.test_compare import judged_runs

    _, b = judged_runs(tmp_path)
    label = "mean reward, all 3 episodes (3 void left out) (none = 0)"
    assert label in b.with_suffix(".out").read_text()
    result = CliRunner().invoke(app, ["view", str(b)])
    assert result.exit_code == 0, result.output
    html = b.with_suffix(".html").read_text()
    assert f"<th>{label}</th><td>0.667 [" in html  # 2 correct, 1 error (none = 0)
    assert "all 6 episodes" not in html
