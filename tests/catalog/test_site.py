"""The static site, checked in a real browser (headless Debian chromium) after its JS ran."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

from envbuilder.catalog import build_catalog, write_site
from envbuilder.environment import Environment, load_environment

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_browser = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"), reason="chromium is not installed (CI installs it)"
)


@pytest.fixture(scope="module")
def site(gsm8k: Environment, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.catalog.conftest import CAPITALS, SQUARES, write_data

    folder = tmp_path_factory.mktemp("envs")
    write_data(folder)
    (folder / "capitals.yaml").write_text(CAPITALS)
    (folder / "squares.yaml").write_text(SQUARES)
    envs = [gsm8k, load_environment(folder / "capitals.yaml"), load_environment(folder / "squares.yaml")]
    out = tmp_path_factory.mktemp("site")
    (out / "env").mkdir()
    (out / "env" / "removed.html").write_text("an environment no longer catalogued")
    write_site(build_catalog(envs), out)
    return out


def browse(url: str, *args: str) -> str:
    assert CHROMIUM is not None, "chromium is required in CI"
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--user-data-dir={profile}", "--window-size=1280,900", "--virtual-time-budget=2000",
                *args, url,
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def cards(dom: str) -> dict[str, bool]:
    """Environment name → whether its card is shown."""
    tags = re.findall(r'<article class="card"[^>]*>', dom)
    return {re.findall(r' data-name="([^"]+)"', t)[0]: not re.search(r" hidden[ >=]", t) for t in tags}


def test_the_site_files(site: Path) -> None:
    assert sorted(p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()) == [
        "catalog.json", "env/capitals.html", "env/gsm8k.html", "env/squares.html", "index.html",
    ]  # fmt: skip


def test_pages_need_no_network(site: Path) -> None:
    for page in [site / "index.html", *(site / "env").iterdir()]:
        html = page.read_text()
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), page
        assert "<link" not in html and "<script src" not in html, page


def test_spec_text_is_escaped(site: Path) -> None:
    for page in (site / "index.html", site / "env" / "capitals.html"):
        html = page.read_text()
        assert "<script>alert(1)</script>" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "Capitals &lt;of&gt; the &#34;world&#34; &amp; more" in html


@needs_browser
def test_index_lists_every_environment(site: Path) -> None:
    dom = browse((site / "index.html").as_uri(), "--dump-dom")
    assert cards(dom) == {"gsm8k": True, "capitals": True, "squares": True}
    assert '<p id="count">3 of 3 environments</p>' in dom
    assert '<a href="env/gsm8k.html">GSM8K</a>' in dom


@needs_browser
def test_a_query_parameter_filters(site: Path) -> None:
    dom = browse((site / "index.html").as_uri() + "?q=gsm", "--dump-dom")
    assert cards(dom) == {"gsm8k": True, "capitals": False, "squares": False}
    assert '<p id="count">1 of 3 environments</p>' in dom
    assert 'id="none" hidden' in dom


@needs_browser
def test_the_hash_filters_by_words_and_tags(site: Path) -> None:
    dom = browse((site / "index.html").as_uri() + "#tag=math", "--dump-dom")
    assert cards(dom) == {"gsm8k": True, "capitals": False, "squares": True}
    assert re.search(r'data-tag="math" aria-pressed="true"', dom)
    dom = browse((site / "index.html").as_uri() + "#q=SQUARE%20integer&tag=math", "--dump-dom")
    assert cards(dom) == {"gsm8k": False, "capitals": False, "squares": True}
    dom = browse((site / "index.html").as_uri() + "#q=nothing-matches", "--dump-dom")
    assert not any(cards(dom).values())
    assert '<p id="none">No environment matches.</p>' in dom


@needs_browser
def test_an_environment_page(site: Path) -> None:
    dom = browse((site / "env" / "gsm8k.html").as_uri(), "--dump-dom")
    assert "<h1>GSM8K</h1>" in dom
    assert "Natalia sold clips to 48 of her friends" in dom
    assert "<td><code>train</code></td><td>train</td><td>7,473</td>" in dom
    assert "<h3><code>submit</code></h3>" in dom
    assert "sha256:" in dom and "Cobbe et al. (2021)" in dom
    capitals = browse((site / "env" / "capitals.html").as_uri(), "--dump-dom")
    assert '<div class="role">system</div>' in capitals and "What is the capital of France?" in capitals


@needs_browser
def test_screenshots(site: Path, tmp_path: Path) -> None:
    for page in (site / "index.html", site / "env" / "gsm8k.html"):
        shot = tmp_path / f"{page.stem}.png"
        browse(page.as_uri(), f"--screenshot={shot}")
        head = shot.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", head[16:24]) == (1280, 900)
