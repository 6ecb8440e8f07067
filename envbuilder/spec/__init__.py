"""Spec files: YAML with positions, the pydantic models, loading with located errors, JSON Schema."""

from envbuilder.spec._code import code_parts, code_problems, own_folder
from envbuilder.spec._load import LoadedSpec, load_spec, parse_spec, read_spec_data
from envbuilder.spec._models import (
    ENV_NAME_PATTERN,
    ConversationSpec,
    DialogueSpec,
    FewShotSpec,
    GraderTest,
    PromptSpec,
    Spec,
    SplitSpec,
    StateSpec,
    SubmitSpec,
    TaskShape,
    TurnSpec,
    UserSpec,
)
from envbuilder.spec._partial import load_spec_partially
from envbuilder.spec._schema import json_schema

__all__ = [
    "ENV_NAME_PATTERN",
    "ConversationSpec",
    "DialogueSpec",
    "FewShotSpec",
    "GraderTest",
    "LoadedSpec",
    "PromptSpec",
    "Spec",
    "SplitSpec",
    "StateSpec",
    "SubmitSpec",
    "TaskShape",
    "TurnSpec",
    "UserSpec",
    "code_parts",
    "code_problems",
    "json_schema",
    "load_spec",
    "load_spec_partially",
    "own_folder",
    "parse_spec",
    "read_spec_data",
]
