"""The package's layers, checked from its source: every import counts.

import-linter's `layers` contract in pyproject.toml (run by `.ci/run`) holds the order; this test
reads that same contract and checks it again from the syntax tree of every module, so that an
import inside a function, under `TYPE_CHECKING`, or as `importlib.import_module("envbuilder.x")`
cannot hide an edge. It also checks that no import cycle exists at any level: between modules,
and between the children of every package (a package's imports are its modules' imports).
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "envbuilder"


@dataclass
class Graph:
    """Modules of a package tree and the envbuilder modules each imports."""

    modules: set[str] = field(default_factory=set)
    packages: set[str] = field(default_factory=set)
    edges: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    """importer -> {imported module: line of the first such import}"""


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(node: ast.AST, package: str, prefix: str) -> Iterable[tuple[str, str | None]]:
    """(module, name imported from it or None) for each import a node makes."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, None
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        for alias in node.names:
            yield module, alias.name
    elif (
        isinstance(node, ast.Call)
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
        and node.args[0].value.startswith(prefix)
        and (
            (isinstance(node.func, ast.Attribute) and node.func.attr in ("import_module", "__import__"))
            or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))
        )
    ):
        yield node.args[0].value, None


def build_graph(root: Path) -> Graph:
    """Every import of the tree at ``root`` (a package folder) of a module inside it."""
    graph = Graph()
    files = sorted(root.rglob("*.py"))
    for path in files:
        name = _module_name(root, path)
        graph.modules.add(name)
        if path.name == "__init__.py":
            graph.packages.add(name)
    top = root.name
    for path in files:
        name = _module_name(root, path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for module, attr in _imported(node, package, top):
                if module != top and not module.startswith(top + "."):
                    continue
                target = f"{module}.{attr}" if attr and f"{module}.{attr}" in graph.modules else module
                while target not in graph.modules and "." in target:
                    target = target.rpartition(".")[0]
                if target != name:
                    graph.edges[name].setdefault(target, node.lineno)  # type: ignore[attr-defined]
    return graph


def read_contracts(pyproject: Path) -> list[tuple[str, list[list[list[str]]]]]:
    """The container and the layers (top first) of each `layers` contract in ``pyproject``: the
    package's, then those of packages whose children are layered too (`envbuilder.isolation`).

    Each layer is a list of groups of sibling modules: siblings joined by ``|`` are independent
    (each its own group), siblings joined by ``:`` may import each other (one group). A layer in
    parentheses is optional (it may not exist)."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]
    found = []
    for contract in config["contracts"]:
        assert contract["type"] == "layers", "every contract is a `layers` contract"
        assert "ignore_imports" not in contract, "a layers contract lists no exceptions"
        (container,) = contract["containers"]
        layers = []
        for line in contract["layers"]:
            groups = [[m.strip().strip("()") for m in group.split(":")] for group in line.split("|")]
            layers.append(groups)
        found.append((container, layers))
    return found


def read_layers(pyproject: Path) -> tuple[str, list[list[list[str]]]]:
    """The package's own `layers` contract (the first): its container and layers."""
    return read_contracts(pyproject)[0]


def _owner(module: str, container: str, place: dict[str, tuple[int, int]]) -> str | None:
    """The layer member (a child of ``container``) that ``module`` belongs to."""
    if not module.startswith(container + "."):
        return None
    child = module[len(container) + 1 :].split(".")[0]
    return child if child in place else None


def layer_violations(
    graph: Graph, container: str, layers: list[list[list[str]]]
) -> tuple[list[str], list[str]]:
    """Imports that go up a layer or across independent siblings, and modules in no layer."""
    place: dict[str, tuple[int, int]] = {}
    for depth, groups in enumerate(reversed(layers)):
        for g, group in enumerate(groups):
            for member in group:
                place[member] = (depth, g)
    unplaced = sorted(
        m
        for m in graph.modules
        if m != container and m.startswith(container + ".") and _owner(m, container, place) is None
    )
    bad = []
    for importer, targets in sorted(graph.edges.items()):
        a = _owner(importer, container, place)
        for target, line in sorted(targets.items()):
            b = _owner(target, container, place)
            if importer == container or target == container:
                # The root package is a lazy facade above every layer: nothing inside imports it.
                if importer != container:
                    bad.append(f"{importer}:{line} imports the root package {target}")
                continue
            if a is None or b is None or a == b:
                continue
            (da, ga), (db, gb) = place[a], place[b]
            if db > da:
                bad.append(f"{importer}:{line} imports {target} (layer {b} is above {a})")
            elif db == da and ga != gb:
                bad.append(f"{importer}:{line} imports {target} ({a} and {b} are independent)")
    return bad, unplaced


def _cycles(nodes: Iterable[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def import_cycles(graph: Graph) -> list[str]:
    """Cycles between modules, and between the children of each package.

    A package's ``__init__`` re-exporting its private modules is how the package shows its API,
    so a module importing its own package (or an ancestor) is an upward edge and is reported as
    such; at the package level a child stands for everything inside it."""
    found = []
    module_edges = {m: set(ts) for m, ts in graph.edges.items()}
    for cycle in _cycles(graph.modules, module_edges):
        found.append("modules: " + " <-> ".join(cycle))
    for package in sorted(graph.packages):
        depth = package.count(".") + 1

        def child(module: str, package: str = package, depth: int = depth) -> str | None:
            if not module.startswith(package + "."):
                return None
            return ".".join(module.split(".")[: depth + 1])

        children: dict[str, set[str]] = defaultdict(set)
        for importer, targets in graph.edges.items():
            a = child(importer)
            if a is None:
                continue
            for target in targets:
                b = child(target)
                if b is not None and b != a:
                    children[a].add(b)
        for cycle in _cycles(children, children):
            found.append(f"inside {package}: " + " <-> ".join(cycle))
    return found


def test_the_contract_is_the_one_in_pyproject_and_the_ci_runs_it():
    container, layers = read_layers(ROOT / "pyproject.toml")
    assert container == PACKAGE
    assert layers[-2] == [["errors", "protocol", "paths", "plugins", "retry", "deadlines", "_version"]]
    assert "lint-imports" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.parametrize("contract", read_contracts(ROOT / "pyproject.toml"), ids=lambda c: c[0])
def test_no_import_goes_up_a_layer(contract):
    graph = build_graph(ROOT / PACKAGE)
    container, layers = contract
    bad, unplaced = layer_violations(graph, container, layers)
    assert unplaced == [], "every module belongs to a layer of the contract"
    assert bad == []


def test_no_import_cycle_at_any_level():
    assert import_cycles(build_graph(ROOT / PACKAGE)) == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path / "pkg"


LAYERS = [[["top"]], [["mid_a"], ["mid_b"]], [["low"]]]


def _check(tmp_path: Path, files: dict[str, str]) -> tuple[list[str], list[str]]:
    base = {
        "__init__.py": "",
        "top.py": "from pkg import mid_a, mid_b, low\n",
        "mid_a/__init__.py": "from pkg.mid_a._x import x\n",
        "mid_a/_x.py": "from pkg import low\nx = 1\n",
        "mid_b.py": "import pkg.low\n",
        "low.py": "",
    }
    graph = build_graph(_tree(tmp_path, base | files))
    bad, unplaced = layer_violations(graph, "pkg", LAYERS)
    assert unplaced == []
    return bad, import_cycles(graph)


def test_a_clean_tree_passes(tmp_path):
    assert _check(tmp_path, {}) == ([], [])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("import pkg.top\n", "pkg.low:1 imports pkg.top (layer top is above low)"),
        (
            "def f():\n    from pkg.mid_a import _x\n",
            "pkg.low:2 imports pkg.mid_a._x (layer mid_a is above low)",
        ),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import top\n",
            "pkg.low:3 imports pkg.top (layer top is above low)",
        ),
        (
            "import importlib\ndef f():\n    return importlib.import_module('pkg.mid_b')\n",
            "pkg.low:3 imports pkg.mid_b (layer mid_b is above low)",
        ),
        ("from . import top\n", "pkg.low:1 imports pkg.top (layer top is above low)"),
        ("from pkg import __version__\n", "pkg.low:1 imports the root package pkg"),
    ],
)
def test_a_planted_upward_import_fails(tmp_path, text, expected):
    bad, _ = _check(tmp_path, {"low.py": text})
    assert bad == [expected]


def test_independent_siblings_may_not_import_each_other(tmp_path):
    bad, _ = _check(tmp_path, {"mid_b.py": "def f():\n    from pkg.mid_a._x import x\n"})
    assert bad == ["pkg.mid_b:2 imports pkg.mid_a._x (mid_b and mid_a are independent)"]


def test_a_cycle_inside_a_package_fails(tmp_path):
    _, cycles = _check(
        tmp_path,
        {
            "mid_a/_y.py": "def f():\n    from pkg.mid_a._x import x\n",
            "mid_a/_x.py": "from pkg.mid_a import _y\nx = 1\n",
        },
    )
    assert cycles == [
        "modules: pkg.mid_a._x <-> pkg.mid_a._y",
        "inside pkg.mid_a: pkg.mid_a._x <-> pkg.mid_a._y",
    ]


def test_a_cycle_between_packages_through_different_modules_fails(tmp_path):
    _, cycles = _check(
        tmp_path,
        {
            "low/__init__.py": "",
            "low/_a.py": "from pkg.low import _b\n",
            "low/_b.py": "",
            "low/_c/__init__.py": "from pkg.low._a import *\n",
            "low/_d.py": "from pkg.low._c import *\n",
        },
    )
    assert cycles == []
    _, cycles = _check(
        tmp_path,
        {
            "low/__init__.py": "",
            "low/_p/__init__.py": "",
            "low/_p/a.py": "from pkg.low._q import b\n",
            "low/_q/__init__.py": "",
            "low/_q/b.py": "",
            "low/_q/c.py": "from pkg.low._p import d\n",
            "low/_p/d.py": "",
        },
    )
    assert cycles == ["inside pkg.low: pkg.low._p <-> pkg.low._q"]
