"""Fuzzing `envbuilder validate`: generated specs (the shipped ones, mutated), odd YAML and odd
Python tool modules must each give located problems, every one of them in one run, and never a
traceback.

A spec is written to a fresh folder beside a *link* to the shipped `envs/data` (so every case
also reads its data through a linked folder) and copies of the shipped tool modules. Mutations
are drawn by Hypothesis (derandomized: the same cases on every run) over the parsed YAML tree:
unknown and missing keys, values of the wrong type, templates that do not parse or name
nothing, regexes that do not compile, unknown `type:` names, paths that lead nowhere or out of
the folder. Python tool modules come from a list of odd shapes (a `typing.TypedDict` parameter,
no state parameter, `*args`, a hint naming nothing, a syntax error, an import that raises or
calls `sys.exit`). What is checked: `validate_spec` returns (never raises), each problem names
its file and a line or key path, a mutation the spec cannot accept is reported at its own key,
and one cause is reported once (no cascade of the same message over many keys).
"""

from __future__ import annotations

import copy
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from envbuilder.authoring import Validation, validate_spec
from envbuilder.cli import app
from envbuilder.errors import Loc
from tests.conftest import ENVS

#: Shipped specs that validate in about a second (the larger ones only add time, not shapes).
SHIPPED = ["digits", "mt_bench", "swe_tomli", "tau2_retail"]
#: Blocks whose mapping is a spec model (`extra="forbid"`): an unknown key there is a problem.
STRICT = [(), ("dataset",), ("prompt",), ("grader",), ("submit",), ("task",), ("state",), ("user",)]
WRONG_VALUES: list[Any] = [1, -5, 2.5, True, None, "", "x", [], {}, [1, "a"], {"zz": 1}, 10**30]
BAD_TEMPLATES = [
    "{{ no_such_field }}",
    "{{ unclosed",
    "{% for x in %}{% endfor %}",
    "{{ ''.__class__.__mro__ }}",
    "{% include '/etc/passwd' %}",
    "{{ question | no_such_filter }}",
]
BAD_REGEXES = ["(", "[a-", "(?P<x", "a{2,1}", "*"]
BAD_PATHS = ["../../etc/passwd", "/etc/passwd", "nowhere.jsonl", "data", "data/*.nothing", ""]
runner = CliRunner()


def _shipped(name: str) -> dict[str, Any]:
    tree = yaml.safe_load((ENVS / f"{name}.yaml").read_text(encoding="utf-8"))
    assert isinstance(tree, dict)
    return tree


def _folder(root: Path) -> Path:
    """A spec folder: `data` links to the shipped data, the shipped tool modules are copied."""
    root.mkdir(parents=True, exist_ok=True)
    if not (root / "data").exists():
        (root / "data").symlink_to(ENVS / "data", target_is_directory=True)
    for module in ENVS.glob("*.py"):
        shutil.copy(module, root / module.name)
    return root


def _nodes(tree: Any, loc: Loc = ()) -> list[tuple[Loc, Any]]:
    out: list[tuple[Loc, Any]] = [(loc, tree)]
    if isinstance(tree, dict):
        for key, value in tree.items():
            out += _nodes(value, (*loc, key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            out += _nodes(value, (*loc, i))
    return out


def _set(tree: Any, loc: Loc, value: Any) -> None:
    parent = tree
    for part in loc[:-1]:
        parent = parent[part]
    parent[loc[-1]] = value


def _delete(tree: Any, loc: Loc) -> None:
    parent = tree
    for part in loc[:-1]:
        parent = parent[part]
    del parent[loc[-1]]


def _located(result: Validation) -> None:
    """No problem without a place: a file, and a line or a key path."""
    for p in result.problems:
        assert p.file, p
        assert p.line is not None or p.loc, p
        assert str(p)


def _no_cascade(result: Validation) -> None:
    """One cause, one problem: the same message at many keys is a cascade (eleven "the spec
    declares no `state:`" after an unreadable state file was one)."""
    counts = Counter(p.message for p in result.problems)
    repeated = {m: n for m, n in counts.items() if n > 3}
    assert not repeated, repeated


def _validate(folder: Path, tree: Any) -> Validation:
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False, allow_unicode=True), encoding="utf-8")
    result = validate_spec(path)
    _located(result)
    _no_cascade(result)
    return result


def _under(result: Validation, loc: Loc) -> bool:
    """Some problem is at ``loc`` or inside it."""
    return any(p.loc[: len(loc)] == loc for p in result.problems)


@st.composite
def mutations(draw: st.DrawFn, tree: dict[str, Any]) -> list[tuple[str, Loc, Any]]:
    """One to three mutations of ``tree``, each at a different top-level block."""
    nodes = [(loc, v) for loc, v in _nodes(tree) if loc]
    blocks = sorted({loc[0] for loc, _ in nodes}, key=str)
    chosen = draw(st.lists(st.sampled_from(blocks), min_size=1, max_size=3, unique=True))
    out: list[tuple[str, Loc, Any]] = []
    for block in chosen:
        inside = [(loc, v) for loc, v in nodes if loc[0] == block]
        strings = [(loc, v) for loc, v in inside if isinstance(v, str)]
        types = [(loc, v) for loc, v in inside if loc[-1] == "type" and isinstance(v, str)]
        kinds = ["drop", "wrong"] + ["template", "regex", "path"] * bool(strings) + ["type"] * bool(types)
        kinds += ["unknown"] * any(loc[:1] == (block,) and loc in STRICT for loc, _ in inside)
        kind = draw(st.sampled_from(kinds))
        if kind == "unknown":
            loc = draw(st.sampled_from([loc for loc, _ in inside if loc in STRICT]))
            out.append((kind, loc, None))
        elif kind in ("template", "regex", "path"):
            loc, _ = draw(st.sampled_from(strings))
            pool = {"template": BAD_TEMPLATES, "regex": BAD_REGEXES, "path": BAD_PATHS}[kind]
            out.append((kind, loc, draw(st.sampled_from(pool))))
        elif kind == "type":
            loc, value = draw(st.sampled_from(types))
            out.append((kind, loc, value[:-1] + "x"))
        else:
            loc, _ = draw(st.sampled_from(inside))
            out.append((kind, loc, draw(st.sampled_from(WRONG_VALUES)) if kind == "wrong" else None))
    return out


@st.composite
def mutated_specs(draw: st.DrawFn) -> tuple[str, dict[str, Any], list[tuple[str, Loc, Any]]]:
    name = draw(st.sampled_from(SHIPPED))
    tree = _shipped(name)
    changes = draw(mutations(tree))
    mutated = copy.deepcopy(tree)
    for kind, loc, value in changes:
        try:
            if kind == "drop":
                _delete(mutated, loc)
            elif kind == "unknown":
                parent = mutated
                for part in loc:
                    parent = parent[part]
                parent["zz_fuzz_key"] = 1
            else:
                _set(mutated, loc, value)
        except (KeyError, IndexError, TypeError):  # an earlier change removed or replaced it
            continue
    return name, mutated, changes


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=mutated_specs())
def test_mutated_shipped_specs_give_located_problems(
    case: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    name, tree, changes = case
    folder = _folder(tmp_path_factory.mktemp(name))
    result = _validate(folder, tree)
    # one cause, one problem (give or take a consequence the author must also know about)
    assert len(result.problems) <= 2 * len(changes) + 1, [str(p) for p in result.problems]
    for kind, loc, _ in changes:
        if kind == "unknown" and isinstance(_get(tree, loc), dict):
            # every unknown key is reported at its own place, whatever else is wrong
            assert _under(result, (*loc, "zz_fuzz_key")), (loc, [str(p) for p in result.problems])
        if kind == "type" and _get(tree, loc) is not None and loc[0] in ("grader", "dataset", "tools"):
            assert _under(result, loc[:-1]), (loc, [str(p) for p in result.problems])


def _get(tree: Any, loc: Loc) -> Any:
    try:
        for part in loc:
            tree = tree[part]
    except (KeyError, IndexError, TypeError):
        return None
    return tree


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_spec_is_valid_through_a_linked_data_folder(name: str, tmp_path: Path) -> None:
    result = _validate(_folder(tmp_path), _shipped(name))
    assert result.ok, [str(p) for p in result.problems]


# -- odd YAML ---------------------------------------------------------------------------------

ODD_YAML = {
    "empty": "",
    "a list": "- name: x\n",
    "a scalar": "just text\n",
    "a tab indent": "name: x\ndataset:\n\ttype: jsonl\n",
    "unclosed flow": "name: x\ndataset: {type: jsonl, files: {test: data.jsonl}\n",
    "duplicate key": "name: x\nname: y\n",
    "python tag": "name: !!python/object/apply:os.system ['true']\n",
    "unknown tag": "name: !custom x\n",
    "alias bomb": "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nname: x\n",
    "deep nesting": "name: " + "[" * 2000 + "]" * 2000 + "\n",
    "non-string keys": "1: x\n? [a, b]\n: y\nname: x\n",
    "a timestamp": "name: 2024-01-01\n",
    "a BOM and CRLF": "\ufeffname: x\r\ndataset: 5\r\n",
    "a merge key": "base: &b {type: jsonl}\ndataset:\n  <<: *b\n  files: 3\nname: x\n",
}


@pytest.mark.parametrize("text", ODD_YAML.values(), ids=list(ODD_YAML))
def test_odd_yaml_gives_located_problems_and_no_traceback(text: str, tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    result = validate_spec(path)
    assert result.problems
    _located(result)
    output = runner.invoke(app, ["validate", str(path)])
    assert output.exit_code == 1 and not isinstance(output.exception, Exception), output.output
    assert "Traceback" not in output.output and f"{path}:" in output.output


def test_bytes_that_are_not_utf8_are_a_located_problem(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    result = validate_spec(path)
    [problem] = result.problems
    assert problem.file == str(path)


# -- odd Python tool modules -------------------------------------------------------------------

SPEC = """name: fuzz-tools
dataset:
  type: jsonl
  files: {{test: rows.jsonl}}
splits:
  test: {{type: test}}
state:
  file: db.json
prompt:
  template: "{{{{ question }}}}"
tools:
{tools}
grader:
  type: exact_match
  target: "{{{{ answer }}}}"
"""

#: (module source, the function's name, what the problem must say; None: the tool is valid)
MODULES: dict[str, tuple[str, str, str | None]] = {
    "TypedDict": (
        "from typing import NotRequired, TypedDict\n"
        "class Item(TypedDict):\n    sku: str\n    qty: NotRequired[int]\n"
        "def order(state, items: list[Item], note: Item | None = None) -> str:\n"
        '    """Order items."""\n    return str(items)\n',
        "order",
        None,
    ),
    "no state parameter": ("def f() -> str:\n    return ''\n", "f", "must take the state as its first"),
    "keyword-only state": ("def f(*, state) -> str:\n    return ''\n", "f", "must take the state"),
    "*args": ("def f(state, *args: int) -> str:\n    return ''\n", "f", "takes *args or **kwargs"),
    "**kwargs": ("def f(state, **kw: int) -> str:\n    return ''\n", "f", "takes *args or **kwargs"),
    "no hint": ("def f(state, x) -> str:\n    return ''\n", "f", "has no type hint"),
    "a hint naming nothing": ("def f(state, x: 'Nowhere') -> str:\n    return ''\n", "f", "cannot be read"),
    "a class hint": (
        "class C:\n    pass\ndef f(state, c: C) -> str:\n    return ''\n",
        "f",
        "'c' (C has no JSON Schema)",
    ),
    "a callable hint": (
        "from collections.abc import Callable\n"
        "def f(state, c: Callable[[int], int]) -> str:\n    return ''\n",
        "f",
        "cannot become the tool's input schema",
    ),
    "a reserved name": ("def f(state, model_config: int) -> str:\n    return ''\n", "f", "reserves"),
    "not callable": ("f = 3\n", "f", "has no function 'f'"),
    "a syntax error": ("def f(state:\n", "f", "fails to load: SyntaxError"),
    "an import that raises": ("raise RuntimeError('boom at import')\n", "f", "RuntimeError: boom at import"),
    "sys.exit at import": ("import sys\nsys.exit(3)\n", "f", "fails to load: SystemExit"),
    "a missing import": ("import no_such_module_zz\n", "f", "No module named 'no_such_module_zz'"),
}


def _tools_spec(folder: Path, cases: list[str]) -> Path:
    (folder / "rows.jsonl").write_text('{"question": "q", "answer": "a"}\n', encoding="utf-8")
    (folder / "db.json").write_text('{"orders": {}}', encoding="utf-8")
    lines = []
    for i, case in enumerate(cases):
        source, function, _ = MODULES[case]
        (folder / f"m{i}.py").write_text(source, encoding="utf-8")
        lines.append(f"  - {{type: function, module: m{i}.py, name: {function}{i}, function: {function}}}")
    path = folder / "spec.yaml"
    path.write_text(SPEC.format(tools="\n".join(lines)), encoding="utf-8")
    return path


@pytest.mark.parametrize("case", list(MODULES))
def test_each_odd_tool_module_is_one_located_problem(case: str, tmp_path: Path) -> None:
    result = validate_spec(_tools_spec(tmp_path, [case]))
    _located(result)
    expected = MODULES[case][2]
    if expected is None:
        assert result.ok, [str(p) for p in result.problems]
        assert result.env is not None
        schema = result.env.tools_listing.tools[-1].input_schema
        assert schema["properties"]["items"]["type"] == "array"
        return
    [problem] = result.problems
    assert problem.loc[:2] == ("tools", 0) and problem.line is not None
    assert expected in problem.message, problem


@given(cases=st.lists(st.sampled_from(list(MODULES)), min_size=2, max_size=5))
@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
def test_every_odd_module_of_a_spec_is_reported_in_one_run(
    cases: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    result = validate_spec(_tools_spec(tmp_path_factory.mktemp("tools"), cases))
    _located(result)
    bad = [i for i, case in enumerate(cases) if MODULES[case][2] is not None]
    assert sorted({p.loc[1] for p in result.problems}) == bad, [str(p) for p in result.problems]


# -- linked data folders ------------------------------------------------------------------------


def test_a_linked_data_folder_is_read_inside_the_allowed_roots_and_refused_once_outside(
    tmp_path: Path,
) -> None:
    """τ²-retail with `data/` a link to a folder elsewhere: valid when authoring, and served
    when that folder is an allowed root (`--data-root`); otherwise one problem per file it
    cannot read (the state file once, not again for each of the eleven tools that use it)."""
    from envbuilder import paths
    from envbuilder.environment import load_environment
    from envbuilder.errors import SpecError

    store = tmp_path / "store"
    shutil.copytree(ENVS / "data" / "tau2_retail", store / "data" / "tau2_retail")
    folder = tmp_path / "spec"
    folder.mkdir()
    (folder / "data").symlink_to(store / "data", target_is_directory=True)
    shutil.copy(ENVS / "tau2_retail_shop.py", folder)
    shutil.copy(ENVS / "tau2_retail.yaml", folder)
    spec = folder / "tau2_retail.yaml"
    assert validate_spec(spec).ok
    with paths.contained([store]):
        env = load_environment(spec)
        assert env.document is not None and len(env.toolbox.listing.tools) == 17
    with paths.contained([]):
        result = validate_spec(spec)
    by_key = Counter(p.loc[:2] for p in result.problems)
    assert by_key[("state", "file")] == 1
    assert not any(p.code == "tool_needs_state" for p in result.problems), [str(p) for p in result.problems]
    _located(result)
    with paths.contained([]), pytest.raises(SpecError):
        load_environment(spec)


@pytest.mark.parametrize("case", ["TypedDict", "a syntax error", "sys.exit at import", "a class hint"])
def test_check_reports_the_same_problems_without_a_traceback(case: str, tmp_path: Path) -> None:
    path = _tools_spec(tmp_path, [case])
    output = runner.invoke(app, ["check", str(path)])
    assert not isinstance(output.exception, Exception), output.output
    assert "Traceback" not in output.output
    if MODULES[case][2] is None:
        assert output.exit_code == 0, output.output
    else:
        assert output.exit_code == 1 and f"{path}:" in output.output and "tools[0]" in output.output
