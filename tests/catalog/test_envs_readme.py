"""`catalog --readme`: a spec's title, description, licence and split names are text in the
Markdown it writes. Rendered as GitHub would (CommonMark, tables, raw HTML allowed, any link
scheme kept), nothing from the spec becomes a tag, a link or an image; its code spans stay."""

from __future__ import annotations

import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

from markdown_it import MarkdownIt

from tests.catalog.conftest import write_data

HOSTILE = """\
name: hostile
title: <script>document.title='pwned'</script> Squares
description: >-
  Click [here](javascript:alert(1)) or ![x](javascript:alert(2)) or <javascript:alert(3)>
  <img src=x onerror=alert(4)> a | b \\`<b>escaped</b>` `code <kept>` &lt;script&gt;
license: <a href="javascript:alert(5)">MIT</a>
dataset:
  type: parquet
  files:
    "<i>train</i>": data/squares.parquet
splits:
  "<i>train</i>": {type: train}
prompt:
  template: "What is {{ n }} squared?"
grader:
  type: exact_match
  target: "{{ square }}"
"""


def render(markdown: str) -> str:
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    md.validateLink = lambda url: True  # keep what a permissive renderer keeps
    return md.render(markdown)


def tags(page: str) -> list[tuple[str, dict[str, str | None]]]:
    """Every start tag of ``page`` as a browser's parser sees it (comments are not tags)."""
    found: list[tuple[str, dict[str, str | None]]] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, dict(attrs)))

    Tags().feed(page)
    return found


def test_spec_text_in_the_readme_is_text(tmp_path: Path) -> None:
    folder = tmp_path / "envs"
    write_data(folder)
    (folder / "hostile.yaml").write_text(HOSTILE)
    readme = folder / "README.md"
    done = subprocess.run(
        [sys.executable, "-m", "envbuilder", "catalog", str(folder), "--readme", str(readme)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert done.returncode == 0, done.stderr
    page = render(readme.read_text())
    rows = page[page.index("<tbody>") :]
    made = {tag for tag, _ in tags(page)}
    assert made == {"h1", "p", "code", "table", "thead", "tr", "th", "tbody", "td", "a"}
    assert [attrs for tag, attrs in tags(page) if tag == "a"] == [{"href": "hostile.yaml"}]  # its spec only
    assert "<code>code &lt;kept&gt;</code>" in rows  # a code span stays one
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt; Squares" in rows
    assert (
        "Click [here](javascript:alert(1)) or ![x](javascript:alert(2)) or &lt;javascript:alert(3)&gt;"
        in rows
    )
    assert "&lt;img src=x onerror=alert(4)&gt; a | b \\<code>&lt;b&gt;escaped&lt;/b&gt;</code>" in rows
    assert "&amp;lt;script&amp;gt;" in rows  # an entity as typed, not decoded into a tag
    assert "&lt;a href=&quot;javascript:alert(5)&quot;&gt;MIT&lt;/a&gt;" in rows
    assert "&lt;i&gt;train&lt;/i&gt; 4" in rows


def test_typed_paths_cannot_end_the_comment(tmp_path: Path) -> None:
    from envbuilder.catalog import render_readme

    text = render_readme({"environments": []}, {}, specs="a--><script>x</script>", readme="R--!>.md")
    assert {tag for tag, _ in tags(render(text))} == {"h1", "p", "code", "table", "thead", "tr", "th"}
