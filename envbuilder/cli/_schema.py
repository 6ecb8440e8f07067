"""``envbuilder schema``: print the JSON Schema of the spec format (for editors and tools)."""

from __future__ import annotations

import json

import typer


def schema_text() -> str:
    """The committed form of the schema: ``schema/envbuilder.schema.json`` is exactly this."""
    from envbuilder.spec import json_schema

    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def schema() -> None:
    """Print the JSON Schema of spec files.

    Regenerate the committed copy with: envbuilder schema > schema/envbuilder.schema.json
    """
    typer.echo(schema_text(), nl=False)
