"""Graders: turn a submitted answer into a grade; a registry keyed by the YAML ``type:``."""

from envbuilder.graders._base import (
    Grade,
    Grader,
    GraderConfig,
    GraderConfigError,
    GraderContext,
    Outcome,
    build_grader,
    graders,
)

__all__ = [
    "Grade",
    "Grader",
    "GraderConfig",
    "GraderConfigError",
    "GraderContext",
    "Outcome",
    "build_grader",
    "graders",
]
