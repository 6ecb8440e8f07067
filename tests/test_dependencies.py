"""Every library envbuilder imports is declared in pyproject.toml (`rich` once was not), and the
plain install (no extras) serves, catalogs and publishes every shipped environment."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from envbuilder.catalog import load_environments
from tests.conftest import ENVS, ROOT

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


def _name(spec: str) -> str:
    return re.split(r"[<>=!~;\[ (]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _core_closure(runtime: set[str]) -> set[str]:
    """The runtime dependencies and everything they require (their own extras left out)."""
    seen: set[str] = set()
    todo = list(runtime)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in requires if "extra ==" not in r.split(";", 1)[-1]]
    return seen


def _modules_only_in_extras() -> set[str]:
    """Top-level modules that only an optional extra brings: absent from a plain install."""
    runtime, extras = _declared()
    core = _core_closure(runtime)
    return {
        module
        for module, dists in importlib.metadata.packages_distributions().items()
        if all(_name(d) in extras - core for d in dists)
    }


_PLAIN_INSTALL = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class PlainInstall(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, PlainInstall())
if sys.argv[2] == "serve":
    from envbuilder.catalog import load_environments
    from envbuilder.server import create_app
    from pathlib import Path
    loaded = load_environments([Path(sys.argv[3])])
    assert not loaded.failures, [str(f) for f in loaded.failures]
    create_app(loaded.envs)
    print(" ".join(env.name for env in loaded.envs))
else:
    from envbuilder.cli import app
    app(sys.argv[2:])
"""


def test_the_plain_install_serves_catalogs_and_publishes_every_shipped_environment(tmp_path: Path) -> None:
    """`pip install -e .` (no extras): every module only an extra brings cannot be imported."""
    blocked = _modules_only_in_extras()
    assert {"bm25s", "hiredis"} <= blocked  # the extras' own modules are really hidden

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-c", _PLAIN_INSTALL, ",".join(sorted(blocked)), *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=ROOT)

    names = [env.name for env in load_environments([ENVS]).envs]
    served = run("serve", str(ENVS))
    assert served.returncode == 0, served.stderr
    assert served.stdout.split() == names
    readme = tmp_path / "README.md"
    catalogued = run("catalog", str(ENVS), "--readme", str(readme))
    assert catalogued.returncode == 0, catalogued.stderr
    assert all(f"| [`{name}`](" in readme.read_text(encoding="utf-8") for name in names)
    published = run("publish", str(ENVS), str(tmp_path / "published"))
    assert published.returncode == 0, published.stderr
    catalog = json.loads((tmp_path / "published" / "catalog.json").read_text(encoding="utf-8"))
    assert [e["name"] for e in catalog["environments"]] == names
