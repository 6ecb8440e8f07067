"""Spec files: YAML with positions, the pydantic models, loading with located errors, JSON Schema."""

from envbuilder.spec._code import code_parts, code_problems, own_folder
from envbuilder.spec._container import ContainerSpec, ImageBuildSpec, RepositorySpec
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
from envbuilder.spec._params import ParamName, ParamSpec, input_model
from envbuilder.spec._partial import load_spec_partially
from envbuilder.spec._plugins import (
    TOOL_NAME_PATTERN,
    GraderConfig,
    SourceConfig,
    ToolConfig,
    api_root,
    graders,
    parse_slice,
    sources,
    tools,
    url_problem,
)
from envbuilder.spec._schema import json_schema
from envbuilder.spec._splits import evaluation_split, training_split

__all__ = [
    "ENV_NAME_PATTERN",
    "TOOL_NAME_PATTERN",
    "ContainerSpec",
    "ConversationSpec",
    "DialogueSpec",
    "FewShotSpec",
    "GraderConfig",
    "GraderTest",
    "ImageBuildSpec",
    "LoadedSpec",
    "ParamName",
    "ParamSpec",
    "PromptSpec",
    "RepositorySpec",
    "SourceConfig",
    "Spec",
    "SplitSpec",
    "StateSpec",
    "SubmitSpec",
    "TaskShape",
    "ToolConfig",
    "TurnSpec",
    "UserSpec",
    "api_root",
    "code_parts",
    "code_problems",
    "evaluation_split",
    "graders",
    "input_model",
    "json_schema",
    "load_spec",
    "load_spec_partially",
    "own_folder",
    "parse_slice",
    "parse_spec",
    "read_spec_data",
    "sources",
    "tools",
    "training_split",
    "url_problem",
]
