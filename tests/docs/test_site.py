"""The manual as a whole: every relative link of README.md and docs/ resolves (to a file, and to a
heading when it names one), the site builds with ``mkdocs build --strict``, and the generated
reference pages hold every key of the schema and every command and option of the CLI."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.docs.pages import DOCS, README, ROOT

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+?)(?: \{#([^}]+)\})?\s*$", re.M)
# The pages the build generates (docs/hooks.py): links to them are checked against the build.
GENERATED = {"reference/spec.md", "reference/cli.md"}


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _without_code(text: str) -> str:
    """The text with fenced code blocks and code spans blanked (links in code are not links)."""
    text = re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _slug(heading: str) -> str:
    """Python-Markdown's toc slug (what MkDocs uses): lowercase words joined by hyphens."""
    text = re.sub(r"[`*_]", "", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading))
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```$", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {explicit or _slug(title) for title, explicit in _HEADING.findall(text)}


def _links(path: Path) -> list[str]:
    return _LINK.findall(_without_code(path.read_text(encoding="utf-8")))


def test_every_relative_link_resolves() -> None:
    broken: list[str] = []
    checked = 0
    for path in _pages():
        for link in _links(path):
            if re.match(r"[a-z]+:", link) or (link.startswith("#") and path == README):
                continue
            target, _, anchor = link.partition("#")
            resolved = (path.parent / target).resolve() if target else path
            where = f"{path.relative_to(ROOT)}: {link}"
            checked += 1
            if target and resolved.relative_to(ROOT).as_posix().removeprefix("docs/") in GENERATED:
                continue  # generated at build time; the strict build checks these links
            if not resolved.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{where} (no heading #{anchor})")
    assert checked > 100
    assert broken == []


def test_the_link_check_finds_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## A section\n\n[ok](#a-section) [bad](missing.md) `[code](x.md)`\n")
    assert _links(page) == ["#a-section", "missing.md"]
    assert _anchors(page) == {"title", "a-section"}


def test_the_front_page_links_the_manual() -> None:
    readme = README.read_text(encoding="utf-8")
    linked = {link.split("#")[0] for link in _links(README)}
    for name in (
        "docs/install.md",
        "docs/tutorials/index.md",
        "docs/how-to/index.md",
        "docs/reference/index.md",
    ):
        assert name in linked, name
    assert "docs/protocol.md" in readme


def test_every_page_is_in_the_navigation() -> None:
    """A page missing from mkdocs.yml's nav would be built but never found."""
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def walk(item: Any) -> list[str]:
        if isinstance(item, str):
            return [item]
        if isinstance(item, list):
            return [p for i in item for p in walk(i)]
        return [p for v in item.values() for p in walk(v)]

    listed = set(walk(config["nav"]))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")} | GENERATED
    assert pages == listed


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_spec_reference_holds_every_key_of_the_schema() -> None:
    hooks = _hooks()
    schema = json.loads((ROOT / "schema" / "envbuilder.schema.json").read_text(encoding="utf-8"))
    text = hooks.spec_reference(schema)
    defs = schema["$defs"]
    documented = {name for name in defs if not name.startswith("Partial")}
    for name in documented:
        assert f"{{#{name.lower()}}}" in text, name
        section = text.split(f"{{#{name.lower()}}}", 1)[1].split("\n### ", 1)[0]
        for key, prop in defs[name].get("properties", {}).items():
            assert f"| `{key}` |" in section, (name, key)
            first_words = " ".join(prop.get("description", "").split()[:4]).replace("|", "\\|")
            assert first_words in section, (name, key)
    # Every link within the page names a section of it.
    anchors = set(re.findall(r"\{#([^}]+)\}", text))
    assert set(re.findall(r"\]\(#([^)]+)\)", text)) <= anchors


def test_the_cli_reference_holds_every_command_and_option() -> None:
    import typer.main

    from envbuilder.cli import app

    text = _hooks().cli_reference(app)

    def walk(command: Any, path: list[str]) -> None:
        anchor = "-".join(path)
        assert f"{{#{anchor}}}" in text, path
        section = text.split(f"{{#{anchor}}}", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
        if command.help:
            assert " ".join(command.help.split()[:6]) in section, path
        for param in command.params:
            if param.hidden:
                continue
            name = f"`{param.name.upper()}`" if param.param_type_name == "argument" else f"`{param.opts[0]}`"
            assert name in section, (path, name)
            if param.help:
                assert " ".join(param.help.split()[:5]).replace("|", "\\|") in section, (path, name)
        for sub_name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, sub_name])

    walk(typer.main.get_command(app), ["envbuilder"])


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict` as CI runs it: no warning (a broken link or anchor, a page out of
    the navigation), and the generated reference pages are in the site."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert 'id="envbuilder-serve"' in cli and "--max-sessions-per-client" in cli
    spec = (site / "reference" / "spec" / "index.html").read_text(encoding="utf-8")
    assert 'id="exactmatchconfig"' in spec and "extract" in spec
    assert (site / "tutorials" / "files" / "conversions.csv").is_file()


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """The build the test above trusts does fail on a broken anchor (a copy of the docs with one)."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    import shutil

    shutil.copytree(DOCS, tmp_path / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", tmp_path)
    (tmp_path / "schema").mkdir()
    shutil.copy(ROOT / "schema" / "envbuilder.schema.json", tmp_path / "schema")
    speed = tmp_path / "docs" / "how-to" / "speed.md"
    speed.write_text(speed.read_text(encoding="utf-8") + "\n[x](../reference/cli.md#no-such-command)\n")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode != 0
    assert "no-such-command" in result.stderr
