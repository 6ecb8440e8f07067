"""Graders: turn a submitted answer into a grade; a registry keyed by the YAML ``type:``."""

from envbuilder.graders._base import (
    FieldUse,
    Grade,
    Grader,
    GraderConfig,
    GraderConfigError,
    GraderContext,
    Outcome,
    build_grader,
    field_uses_of,
    grade_off_loop,
    graders,
)
from envbuilder.graders._fidelity import fidelity_of
from envbuilder.graders._trajectory import TRAJECTORY, Trajectory

__all__ = [
    "TRAJECTORY",
    "FieldUse",
    "Grade",
    "Grader",
    "GraderConfig",
    "GraderConfigError",
    "GraderContext",
    "Outcome",
    "Trajectory",
    "build_grader",
    "fidelity_of",
    "field_uses_of",
    "grade_off_loop",
    "graders",
]
