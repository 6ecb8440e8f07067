"""Spec files: YAML with positions, the pydantic models, loading with located errors, JSON Schema."""

from envbuilder.spec._load import LoadedSpec, load_spec, parse_spec
from envbuilder.spec._models import PromptSpec, Spec, SplitSpec, SubmitSpec, TaskShape
from envbuilder.spec._schema import json_schema

__all__ = [
    "LoadedSpec",
    "PromptSpec",
    "Spec",
    "SplitSpec",
    "SubmitSpec",
    "TaskShape",
    "json_schema",
    "load_spec",
    "parse_spec",
]
