"""Authoring tools behind the CLI: full validation, self-checks, and spec scaffolding."""

from envbuilder.authoring._hacks import HackReport, hack_cases, run_hacks
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
    "HackReport",
    "MissingTargets",
    "Scaffold",
    "Validation",
    "gold_cases",
    "gold_is_circular",
    "hack_cases",
    "missing_targets",
    "run_cases",
    "run_hacks",
    "scaffold_spec",
    "spec_cases",
    "validate_spec",
]
