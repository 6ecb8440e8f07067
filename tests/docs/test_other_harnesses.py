"""docs/how-to/other-harnesses.md works as shown: the OpenEnv client example prints what its
comments say, and the TRL environment class, used as TRL 1.16's GRPOTrainer uses an
``environment_factory`` (its tools found the same way), plays a gsm8k episode over the door."""

from __future__ import annotations

import contextlib
import inspect
import io
import re
from collections.abc import Iterator
from typing import Any

import pytest

from envbuilder.environment import load_environment
from envbuilder.server import ServerSettings, create_app, uvicorn_options
from tests.conftest import ENVS
from tests.docs.pages import blocks, page
from tests.servers import serve_app

pytest.importorskip("openenv.core")

PAGE = "how-to/other-harnesses.md"
SHOWN = "http://127.0.0.1:8080/openenv"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    settings = ServerSettings(doors=("openenv",))
    with serve_app(
        create_app([load_environment(ENVS / "gsm8k.yaml")], settings), **uvicorn_options(settings)
    ) as base:
        yield f"{base}/openenv"


def _run(block: str, url: str) -> tuple[dict[str, Any], str]:
    assert SHOWN in block
    scope: dict[str, Any] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.replace(SHOWN, url), PAGE, "exec"), scope)
    return scope, out.getvalue()


def test_the_openenv_example_prints_what_it_says(url: str) -> None:
    block = blocks(page(PAGE), "python")[0]
    _, printed = _run(block, url)
    expected = [m.group(1).strip() for m in re.finditer(r"print\(.*\)[ \t]+# (.+)$", block, re.M)]
    lines = [line.strip() for line in printed.splitlines()]
    assert expected == ["the prompt as chat messages", "['submit']", "1.0 True"]
    assert lines[1:] == expected[1:]
    assert "Janet" in lines[0]


def test_the_trl_environment_class_plays_as_grpo_trainer_uses_it(url: str) -> None:
    block = blocks(page(PAGE), "python")[1]
    scope, _ = _run(block, url)
    factory = scope["Gsm8k"]
    env = factory()  # GRPOTrainer: one instance per rollout, its public methods as tools
    members = [name for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)]
    tools = [name for name in members if name not in ("reset", "get_reward") and not name.startswith("_")]
    assert tools == ["submit"] and "reset" in members and "get_reward" in members
    gsm8k = load_environment(ENVS / "gsm8k.yaml")
    task = gsm8k.split("train").task(4)
    prompt = env.reset(prompt="(the dataset's prompt column)", index=4)
    assert task["question"] in prompt
    assert env.get_reward() is None  # nothing answered yet
    gold = task["answer"].split("####")[-1].strip()
    assert env.submit(answer="-1").startswith("Incorrect") and env.get_reward() == 0.0
    env.reset(prompt="", index=4)
    assert env.submit(answer=gold).startswith("Correct") and env.get_reward() == 1.0


def test_the_mcp_example_lists_the_tools(url: str) -> None:
    block = blocks(page(PAGE), "python")[2]
    assert "use_production_mode = True" in block
    _, printed = _run(block, url)
    assert printed.splitlines() == ["['submit']"]
