"""Authoring tools behind the CLI: full validation, self-checks, and spec scaffolding."""

from envbuilder.authoring._hacks import HackReport, hack_cases, run_hacks
from envbuilder.authoring._scaffold import Scaffold, scaffold_spec
from envbuilder.authoring._selfcheck import (
    BadRows,
    Case,
    CheckResult,
    gold_cases,
    gold_is_circular,
    run_cases,
    scan_tasks,
    spec_cases,
)
from envbuilder.authoring._validate import Validation, validate_spec

__all__ = [
    "BadRows",
    "Case",
    "CheckResult",
    "HackReport",
    "Scaffold",
    "Validation",
    "gold_cases",
    "gold_is_circular",
    "hack_cases",
    "run_cases",
    "run_hacks",
    "scaffold_spec",
    "scan_tasks",
    "spec_cases",
    "validate_spec",
]
