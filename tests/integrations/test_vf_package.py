"""``envbuilder export verifiers``: five shipped specs exported, ``pip install``ed into a fresh
virtualenv (from the folders, without the network: ``--no-deps --no-build-isolation``, the
virtualenv sees this one's packages through a ``.pth``), and played by verifiers' own
``vf-eval NAME`` run by that virtualenv's interpreter against a scripted local chat server:
task 0 answered right, task 1 wrong, so the rewards must be exactly ``[1.0, 0.0]``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envbuilder.authoring import gold_cases
from envbuilder.cli import app
from envbuilder.environment import Environment, load_environment
from envbuilder.errors import DataError
from envbuilder.integrations import export_verifiers
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, reply, tool_call_reply

SPECS = ["gsm8k", "gsm8k_tools", "math500", "humaneval", "tau2_retail"]
Reply = tuple[int, dict[str, Any], dict[str, str]]


@dataclass
class Installed:
    python: Path
    server: ChatServer
    folder: Path


def _retail_copy(folder: Path, base_url: str) -> Path:
    """tau2_retail with its simulated customer on the local chat server."""
    folder.mkdir()
    shutil.copy(ENVS / "tau2_retail_shop.py", folder)
    shutil.copytree(ENVS / "data" / "tau2_retail", folder / "data" / "tau2_retail")
    spec = folder / "tau2_retail.yaml"
    spec.write_text((ENVS / "tau2_retail.yaml").read_text().replace("https://api.openai.com/v1", base_url))
    return spec


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    tmp = tmp_path_factory.mktemp("vfpkg")
    with ChatServer(lambda request, i: (500, {}, {})) as server:
        specs = {name: ENVS / f"{name}.yaml" for name in SPECS}
        specs["tau2_retail"] = _retail_copy(tmp / "retail", server.base_url)
        for name, spec in specs.items():
            export_verifiers(spec, tmp / "packages" / name, trust_code=True)
        venv = tmp / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        python = venv / "bin" / "python"
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        ours = sysconfig.get_paths()["purelib"]  # this environment's packages (and editable envbuilder)
        Path(site, "parent_site.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
        pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index"]
        pip += ["--no-deps", "--no-build-isolation", *(str(tmp / "packages" / n) for n in SPECS)]
        done = subprocess.run(pip, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        yield Installed(python, server, tmp)


def _vf_eval(installed: Installed, name: str, handler: Callable[[dict[str, Any], int], Reply]) -> str:
    installed.server.handler = handler
    args = {"max_turns": 20}
    vf_eval = Path(sys.executable).parent / "vf-eval"  # verifiers' console script, run by the new venv
    env = dict(os.environ, OPENAI_API_KEY="sk-local", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    out = installed.folder / "out" / name
    out.mkdir(parents=True)
    command = [str(installed.python), str(vf_eval), name, "-m", "scripted", "-n", "2", "-r", "1"]
    command += ["-a", json.dumps(args), "-b", installed.server.base_url, "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=out)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split("episode_reward:", 1)[1].split("\n")[1].strip()


def _tasks(name: str, n: int = 2) -> tuple[Environment, list[dict[str, Any]]]:
    env = load_environment(ENVS / f"{name}.yaml")
    return env, [dict(env.split("test").task(i)) for i in range(n)]


def _which(request: dict[str, Any], keys: list[str]) -> int:
    text = json.dumps(request["messages"])
    return next(i for i, key in enumerate(keys) if json.dumps(key)[1:-1] in text)


def _tool_turns(request: dict[str, Any]) -> int:
    return sum(1 for m in request["messages"] if m["role"] == "tool")


def test_the_package_installs_where_verifiers_finds_it(installed: Installed) -> None:
    for name in SPECS:
        found = subprocess.run(
            [str(installed.python), "-c", f"import {name}; print({name}.__file__)"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        assert Path(found).is_relative_to(installed.python.parent.parent), found  # the venv's copy
    readme = (installed.folder / "packages" / "humaneval" / "README.md").read_text()
    assert readme.startswith("# HumanEval\n") and "| Splits | test (164 tasks) |" in readme
    assert "vf-eval humaneval" in readme


def test_gsm8k_plain_answers(installed: Installed) -> None:
    _, tasks = _tasks("gsm8k")
    keys = [t["question"] for t in tasks]
    golds = [t["answer"].split("####")[-1].strip() for t in tasks]

    def handler(request: dict[str, Any], _: int) -> Reply:
        i = _which(request, keys)
        return 200, reply(f"The answer is {golds[0] if i == 0 else '999999'}."), {}

    assert _vf_eval(installed, "gsm8k", handler) == "r1: [1.0, 0.0]"


def test_gsm8k_tools_tool_calls(installed: Installed) -> None:
    _, tasks = _tasks("gsm8k_tools")
    keys = [t["question"] for t in tasks]
    golds = [t["answer"].split("####")[-1].strip() for t in tasks]

    def handler(request: dict[str, Any], _: int) -> Reply:
        i, turn = _which(request, keys), _tool_turns(request)
        if turn == 0:
            return 200, tool_call_reply("calculator", json.dumps({"expression": "6*7"})), {}
        answer = golds[0] if i == 0 else "-1"
        return 200, tool_call_reply("submit", json.dumps({"answer": answer}), f"call_{turn}"), {}

    assert _vf_eval(installed, "gsm8k_tools", handler) == "r1: [1.0, 0.0]"


def test_math500_latex_answers(installed: Installed) -> None:
    _, tasks = _tasks("math500")
    keys = [t["problem"] for t in tasks]

    def handler(request: dict[str, Any], _: int) -> Reply:
        answer = tasks[0]["answer"] if _which(request, keys) == 0 else r"\frac{1}{987654}"
        return 200, tool_call_reply("submit", json.dumps({"answer": answer})), {}

    assert _vf_eval(installed, "math500", handler) == "r1: [1.0, 0.0]"


def test_humaneval_code_runs_in_the_sandbox(installed: Installed) -> None:
    _, tasks = _tasks("humaneval")
    keys = [f"def {t['entry_point']}(" for t in tasks]

    def handler(request: dict[str, Any], _: int) -> Reply:
        task = tasks[_which(request, keys)]
        body = task["canonical_solution"] if task is tasks[0] else "    return None\n"
        code = f"```python\n{task['prompt']}{body}```"
        return 200, tool_call_reply("submit", json.dumps({"answer": code})), {}

    assert _vf_eval(installed, "humaneval", handler) == "r1: [1.0, 0.0]"


def test_tau2_retail_with_a_simulated_customer(installed: Installed) -> None:
    """The agent does task 0's gold actions and none of task 1's; the customer (the same chat
    server, asked by the simulated user) says which scenario it is, then ends the chat."""
    env, tasks = _tasks("tau2_retail")
    cases = {c.index: c for c in gold_cases(env, len(env.split("test"))) if c.split == "test" and c.index < 2}
    scenarios = [t["reason_for_call"] for t in tasks]

    def handler(request: dict[str, Any], _: int) -> Reply:
        if not request.get("tools"):  # the simulated customer
            i = _which(request, scenarios)
            said = [m for m in request["messages"] if m["role"] == "assistant"]
            return 200, reply(f"Hello, this is scenario {i}." if not said else "Thanks. ###STOP###"), {}
        text = json.dumps(request["messages"])
        found = re.search(r"this is scenario (\d)", text)
        turn = _tool_turns(request)
        if found is None:
            return 200, tool_call_reply("send_message", json.dumps({"message": "Hello! How can I help?"})), {}
        case = cases[int(found.group(1))]
        calls = (case.calls or []) if case.index == 0 else []
        step = turn - 1  # the greeting's reply was the first tool turn
        if step < len(calls):
            call = calls[step]
            return 200, tool_call_reply(call["name"], json.dumps(call["arguments"]), f"call_{turn}"), {}
        message = json.dumps({"message": case.response or "Done."})
        return 200, tool_call_reply("send_message", message, f"call_{turn}"), {}

    assert _vf_eval(installed, "tau2_retail", handler) == "r1: [1.0, 0.0]"


def test_export_refuses_a_used_folder_a_bad_name_and_a_changed_pack(tmp_path: Path) -> None:
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    with pytest.raises(DataError) as used:
        export_verifiers(ENVS / "gsm8k.yaml", tmp_path / "used")
    assert used.value.code == "export_exists"
    with pytest.raises(DataError) as named:
        export_verifiers(ENVS / "gsm8k.yaml", tmp_path / "bad", name="8k")
    assert named.value.code == "export_name" and not (tmp_path / "bad").exists()

    result = CliRunner().invoke(app, ["export", "verifiers", str(ENVS / "gsm8k.yaml"), str(tmp_path / "pkg")])
    assert result.exit_code == 0, result.output
    assert "vf-eval gsm8k" in result.output
    source = (tmp_path / "pkg" / "gsm8k" / "__init__.py").read_text()
    assert re.search(r"PACK_SHA256 = '[0-9a-f]{64}'", source)
    # A changed pack is refused before it is opened (verifiers is imported by the package's loader).
    pytest.importorskip("verifiers")
    sys.path.insert(0, str(tmp_path / "pkg"))
    try:
        import gsm8k  # type: ignore[import-not-found]

        with zipfile.ZipFile(gsm8k.PACK, "a") as zf:
            zf.writestr("extra.txt", "changed")
        with pytest.raises(DataError) as changed:
            gsm8k.load_environment()
        assert changed.value.code == "pack_mismatch"
    finally:
        sys.path.remove(str(tmp_path / "pkg"))
        sys.modules.pop("gsm8k", None)
