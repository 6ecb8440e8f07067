"""Authoring tools behind the CLI: full validation, self-checks, and spec scaffolding."""

from envbuilder.authoring._scaffold import Scaffold, scaffold_spec
from envbuilder.authoring._selfcheck import (
    Case,
    CheckResult,
    MissingTargets,
    gold_cases,
    gold_is_circular,
    missing_targets,
    run_cases,
    spec_cases,
)
from envbuilder.authoring._validate import Validation, validate_spec

__all__ = [
    "Case",
    "CheckResult",
    "MissingTargets",
    "Scaffold",
    "Validation",
    "gold_cases",
    "gold_is_circular",
    "missing_targets",
    "run_cases",
    "scaffold_spec",
    "spec_cases",
    "validate_spec",
]
