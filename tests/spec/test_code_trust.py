"""The rule of `envbuilder.spec._code`: which parts of a spec run code, which folders are the
user's own, and the located refusal (nothing imported: these specs name modules that do not
exist, so building one would fail with another error)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from envbuilder import paths
from envbuilder.environment import Environment
from envbuilder.errors import Loc, SpecError
from envbuilder.plugins import ConfigModel
from envbuilder.spec import LoadedSpec, code_parts, code_problems, load_spec, own_folder, parse_spec
from envbuilder.spec._yaml import Positions
from envbuilder.tools._function import FunctionConfig
from envbuilder.tools._mcp import McpConfig

SPEC = """\
name: shop
dataset: {type: jsonl, files: {test: tasks.jsonl}}
splits: {test: {type: test}}
prompt: {template: "{{ question }}"}
grader: {type: exact_match, target: "{{ answer }}"}
state: {file: db.json}
tools:
  - {type: calculator}
  - {type: function, name: a, module: absent_shop.py}
  - {type: function, name: b, module: absent_shop.py}
  - {type: mcp, command: [python, absent_server.py, --flag]}
  - {type: mcp, url: "http://127.0.0.1:9/mcp", prefix: u_}
  - {type: function, name: c, module: absent_pkg.shop}
"""
HINT = (
    "Pass --trust-code (trust_code=True in Python) if you trust its source and want its code to "
    "run; a pack whose signature verifies with a key you pass as --trusted-key is trusted too"
)


def loaded_in(folder: Path, text: str = SPEC, name: str = "shop.yaml") -> LoadedSpec:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return load_spec(folder / name)


def test_the_parts_that_run_code() -> None:
    spec = parse_spec(SPEC, file="shop.yaml").spec
    assert code_parts(spec) == [
        (("tools", 1, "module"), "function", "imports and runs the Python module 'absent_shop.py'"),
        (("tools", 2, "module"), "function", "imports and runs the Python module 'absent_shop.py'"),
        (("tools", 3, "command"), "mcp", "starts the command 'python absent_server.py --flag'"),
        (
            ("tools", 4, "url"),
            "mcp",
            "offers the agent the tools of the MCP server at 'http://127.0.0.1:9/mcp'",
        ),
        (("tools", 5, "module"), "function", "imports and runs the Python module 'absent_pkg.shop'"),
    ]
    assert code_parts(parse_spec(SPEC.split("tools:")[0], file="x.yaml").spec) == []


class _Runs(ConfigModel):
    """A plugin's config without a `type` that runs code at its root."""

    def runs_code(self) -> tuple[Loc, str]:
        return (), "runs itself"


class _Holder(ConfigModel):
    by_name: dict[str, FunctionConfig] = Field(default_factory=dict)
    pair: tuple[McpConfig, ...] = ()
    root: _Runs | None = None
    text: str = "not a part"


def test_parts_are_found_at_any_depth_of_lists_tuples_and_mappings() -> None:
    holder = _Holder(
        by_name={"x": FunctionConfig(type="function", name="x", module="m.py")},
        pair=(McpConfig(type="mcp", url="https://h/mcp"),),
        root=_Runs(),
    )
    assert code_parts(holder) == [
        (("by_name", "x", "module"), "function", "imports and runs the Python module 'm.py'"),
        (("pair", 0, "url"), "mcp", "offers the agent the tools of the MCP server at 'https://h/mcp'"),
        (("root",), "", "runs itself"),
    ]
    assert code_parts(_Runs()) == [((), "", "runs itself")]


def test_the_users_own_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVBUILDER_CACHE_DIR", str(cache))
    pack = tmp_path / "unzipped"
    (pack / "sub").mkdir(parents=True)
    (pack / paths.PACK_LOCK_NAME).write_text("{}")
    odd = tmp_path / "odd"
    (odd / paths.PACK_LOCK_NAME).mkdir(parents=True)  # a folder of that name is not a lock
    assert own_folder(tmp_path / "mine")
    assert own_folder(odd)
    assert not own_folder(cache)
    assert not own_folder(cache / "packs" / "x")
    assert not own_folder(pack)
    assert not own_folder(pack / "sub")
    link = tmp_path / "link"
    link.symlink_to(cache, target_is_directory=True)
    assert not own_folder(link)  # followed


def _message(origin: str, rest: str) -> str:
    return f"this spec {origin}, and its {rest}: refusing to run code from it before you say so"


def test_a_pack_is_refused_with_one_located_problem_per_piece_of_code(tmp_path: Path) -> None:
    folder = tmp_path / "unzipped"
    loaded = loaded_in(folder)
    (folder / paths.PACK_LOCK_NAME).write_text("{}")
    origin = "comes from a pack, not from your own folders"
    problems = code_problems(loaded)
    spec = str(folder / "shop.yaml")
    assert [str(p) for p in problems] == [
        f"{spec}:9:39 tools[1].module: "
        + _message(
            origin, "`function` tool imports and runs the Python module 'absent_shop.py' (so do 1 more tools)"
        )
        + f". {HINT}",
        f"{spec}:11:26 tools[3].command: "
        + _message(origin, "`mcp` tool starts the command 'python absent_server.py --flag'")
        + f". {HINT}",
        f"{spec}:12:22 tools[4].url: "
        + _message(
            origin, "`mcp` tool offers the agent the tools of the MCP server at 'http://127.0.0.1:9/mcp'"
        )
        + f". {HINT}",
        f"{spec}:13:39 tools[5].module: "
        + _message(origin, "`function` tool imports and runs the Python module 'absent_pkg.shop'")
        + f". {HINT}",
    ]
    assert {p.code for p in problems} == {"code_not_trusted"}
    assert code_problems(loaded, trust_code=True) == []
    assert code_problems(loaded, trust_code=False) == problems
    with pytest.raises(SpecError) as info:
        Environment(loaded)
    assert info.value.problems == problems


def test_the_cache_and_trust_code_false(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVBUILDER_CACHE_DIR", str(cache))
    cached = loaded_in(cache / "filters" / "x")
    [first, *_] = code_problems(cached)
    assert first.message.startswith(f"this spec lies in envbuilder's cache folder ({cache}), not in your own")
    assert code_problems(cached, trust_code=True) == []
    own = loaded_in(tmp_path / "mine")
    assert code_problems(own) == []
    [first, *_] = code_problems(own, trust_code=False)
    assert first.message.startswith("this spec was loaded with trust_code=False, and its `function` tool")


@pytest.mark.parametrize("where", ["pack", "cache"])
def test_a_base_outside_the_users_folders_makes_the_spec_untrusted(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVBUILDER_CACHE_DIR", str(cache))
    base = cache / "x" if where == "cache" else tmp_path / "pack"
    loaded_in(base, name="base.yaml")
    if where == "pack":
        (base / paths.PACK_LOCK_NAME).write_text("{}")
    mine = tmp_path / "mine"
    child = loaded_in(mine, f"extends: {base / 'base.yaml'}\nname: child\n", name="child.yaml")
    assert child.positions.bases == [base / "base.yaml"]
    [first, *_] = code_problems(child)
    said = "comes from a pack" if where == "pack" else "lies in envbuilder's cache folder"
    assert first.message.startswith(f"this spec {said}")
    assert first.file == str(base / "base.yaml")  # where the part is written


def test_nouns_and_counts_of_other_parts(tmp_path: Path) -> None:
    folder = tmp_path / "unzipped"
    folder.mkdir()
    (folder / paths.PACK_LOCK_NAME).write_text("{}")

    def problems(spec: Any) -> list[str]:
        loaded = LoadedSpec(spec=spec, path=None, base_dir=folder, positions=Positions("x.yaml"))
        return [p.message for p in code_problems(loaded)]

    origin = "comes from a pack, not from your own folders"
    assert problems(_Runs()) == [_message(origin, "`` part runs itself")]
    two = {"a": FunctionConfig(type="function", name="a", module="m.py"), "b": FunctionConfig(
        type="function", name="b", module="m.py")}  # fmt: skip
    assert problems(_Holder(by_name=two)) == [
        _message(origin, "`function` part imports and runs the Python module 'm.py' (so do 1 more parts)")
    ]
    three = [_Runs(), _Runs(), _Runs()]

    class Graders(ConfigModel):
        grader: list[_Runs]
        dataset: _Runs

    assert problems(Graders(grader=three, dataset=_Runs())) == [
        _message(origin, "`` grader runs itself (so do 3 more graders)")
    ]
    assert problems(_Holder()) == []

    class Source(ConfigModel):
        dataset: _Runs

    assert problems(Source(dataset=_Runs())) == [_message(origin, "`` dataset runs itself")]
