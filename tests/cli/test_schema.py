"""`envbuilder schema`: the JSON Schema describes every key, and the committed copy is current."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from envbuilder.cli import app
from envbuilder.cli._schema import schema_text
from envbuilder.spec import json_schema

ROOT = Path(__file__).parent.parent.parent
COMMITTED = ROOT / "schema" / "envbuilder.schema.json"


def _undescribed(node: Any, path: str = "#") -> list[str]:
    out: list[str] = []
    if isinstance(node, dict):
        for key, prop in (node.get("properties") or {}).items():
            if not (isinstance(prop, dict) and prop.get("description")):
                out.append(f"{path}/properties/{key}")
        for key, value in node.items():
            out += _undescribed(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _undescribed(value, f"{path}/{i}")
    return out


def test_every_key_has_a_description() -> None:
    assert _undescribed(json_schema()) == [], "add an attribute docstring to each of these fields"


def test_the_walker_finds_undescribed_keys() -> None:
    assert _undescribed({"$defs": {"X": {"properties": {"a": {"type": "string"}}}}}) == [
        "#/$defs/X/properties/a"
    ]


def test_cli_prints_the_schema() -> None:
    result = CliRunner().invoke(app, ["schema"])
    assert result.exit_code == 0
    assert json.loads(result.output) == json_schema()
    assert result.output == schema_text()


def test_committed_schema_is_current() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == schema_text(), (
        "schema/envbuilder.schema.json is stale; regenerate it with:\n"
        "    envbuilder schema > schema/envbuilder.schema.json"
    )


def test_shipped_specs_point_editors_at_the_schema() -> None:
    for spec in (ROOT / "envs" / "gsm8k.yaml", ROOT / "envs" / "gsm8k_cot.yaml"):
        first = spec.read_text(encoding="utf-8").splitlines()[0]
        assert first == "# yaml-language-server: $schema=../schema/envbuilder.schema.json", spec.name
