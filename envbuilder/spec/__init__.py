"""Spec files: YAML with positions, the pydantic models, loading with located errors, JSON Schema."""

from envbuilder.spec._load import LoadedSpec, load_spec, parse_spec
from envbuilder.spec._models import (
    ConversationSpec,
    FewShotSpec,
    PromptSpec,
    Spec,
    SplitSpec,
    SubmitSpec,
    TaskShape,
    TurnSpec,
)
from envbuilder.spec._schema import json_schema

__all__ = [
    "ConversationSpec",
    "FewShotSpec",
    "LoadedSpec",
    "PromptSpec",
    "Spec",
    "SplitSpec",
    "SubmitSpec",
    "TaskShape",
    "TurnSpec",
    "json_schema",
    "load_spec",
    "parse_spec",
]
