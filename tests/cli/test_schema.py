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
            if key == "properties" and isinstance(value, dict):  # a map of keys, not a schema
                for name, prop in value.items():  # (a key may be named `properties` itself)
                    out += _undescribed(prop, f"{path}/properties/{name}")
            else:
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


def _schema_errors(text: str) -> list[str]:
    import jsonschema

    from envbuilder.spec._yaml import load_yaml

    validator = jsonschema.Draft202012Validator(json.loads(COMMITTED.read_text(encoding="utf-8")))
    data, _ = load_yaml(text, "spec.yaml")
    return sorted(e.message for e in validator.iter_errors(data))


def test_the_committed_schema_is_a_valid_draft_2020_12_schema() -> None:
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(json.loads(COMMITTED.read_text(encoding="utf-8")))


def test_every_shipped_spec_validates_against_the_schema() -> None:
    specs = sorted((ROOT / "envs").glob("*.yaml"))
    assert any("extends:" in p.read_text(encoding="utf-8") for p in specs)
    for spec in specs:
        assert _schema_errors(spec.read_text(encoding="utf-8")) == [], spec.name


def test_extends_lifts_required_keys_at_every_depth_but_not_unknown_ones() -> None:
    full = (ROOT / "envs" / "gsm8k.yaml").read_text(encoding="utf-8")
    without_grader = full[: full.index("\ngrader:")] + "\n"
    assert _schema_errors(without_grader) == ["'grader' is a required property"]
    variant = "extends: gsm8k.yaml\nname: v\ngrader:\n  extract: none\nsplits:\n  test: {limit: 5}\n"
    assert _schema_errors(variant) == []
    assert _schema_errors(variant + "promt: {template: x}\n") == [
        "Additional properties are not allowed ('promt' was unexpected)"
    ]
