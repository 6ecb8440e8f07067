"""Every library envbuilder imports is declared in pyproject.toml (`rich` once was not)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib

from tests.conftest import ROOT

#: Modules that ship as a separate distribution but are pinned by, and documented as part of,
#: a declared dependency.
_PART_OF = {"pydantic_core": "pydantic"}


def _declared() -> tuple[set[str], set[str]]:
    """Distribution names: the runtime dependencies, and those of the optional extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    def names(specs: list[str]) -> set[str]:
        return {re.split(r"[<>=!~;\\[ ]", spec, maxsplit=1)[0].lower().replace("_", "-") for spec in specs}

    extras = set().union(*(names(v) for v in project["optional-dependencies"].values()))
    return names(project["dependencies"]), extras


def _imports() -> dict[str, bool]:
    """Top-level modules imported by envbuilder → whether some import of it is not guarded by
    ``except ImportError`` (then it must be a runtime dependency, not only an extra)."""
    found: dict[str, bool] = {}
    for path in (ROOT / "envbuilder").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = {
            id(node)
            for handler in ast.walk(tree) if isinstance(handler, ast.Try)
            if any("ImportError" in ast.unparse(h.type or ast.Name("")) for h in handler.handlers)
            for stmt in handler.body for node in ast.walk(stmt)
        }  # fmt: skip
        for node in ast.walk(tree):
            modules = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            for module in modules:
                top = module.split(".")[0]
                found[top] = found.get(top, False) or id(node) not in guarded
    return found


def test_every_import_is_declared() -> None:
    runtime, extras = _declared()
    distributions = importlib.metadata.packages_distributions()
    missing = []
    for module, unguarded in sorted(_imports().items()):
        if module == "envbuilder" or module in sys.stdlib_module_names:
            continue
        dists = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        dists |= {_PART_OF[module]} if module in _PART_OF else set()
        allowed = runtime if unguarded else runtime | extras
        if not dists & allowed:
            missing.append(f"{module} ({', '.join(sorted(dists))})")
    assert missing == [], "imported but not declared in pyproject.toml: " + ", ".join(missing)
