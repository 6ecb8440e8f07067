"""Tasks written for NeMo Gym, not by us: every resources server's ``data/example.jsonl`` that
the installed ``nemo-gym`` ships is read by ``type: nemo_gym`` and its first prompt rendered, or
refused naming the line and the reason (a prompt with images, with earlier tool calls or
reasoning, or made by the resources server at start); the math server's tasks are graded.

Needs a Python with ``nemo-gym`` (``ENVBUILDER_NEMO_GYM_PYTHON``, as tests/server/test_nemo_gym_door.py)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from envbuilder.environment import Environment
from envbuilder.errors import SpecError
from envbuilder.spec import parse_spec

PYTHON = os.environ.get("ENVBUILDER_NEMO_GYM_PYTHON")
pytestmark = pytest.mark.skipif(
    not PYTHON, reason="needs a Python 3.12 with nemo-gym: set ENVBUILDER_NEMO_GYM_PYTHON"
)

REFUSALS = (
    "a message's content is neither text nor text parts",  # images
    "the prompt holds a",  # earlier reasoning or tool calls
    "the task's prompt is empty",  # made by the resources server
)


def _servers() -> Path:
    assert PYTHON is not None
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    return Path(site) / "resources_servers"


def _env(file: Path, grader: str = '{type: exact_match, target: "x"}') -> Environment:
    text = f"""
name: imported
dataset: {{type: nemo_gym, files: {{test: {file}}}}}
splits: {{test: {{type: test}}}}
prompt: {{conversation: {{column: messages}}}}
grader: {grader}
"""
    return Environment(parse_spec(text, file="imported.yaml", base_dir=file.parent))


def test_every_example_task_file_is_read_or_refused_naming_why() -> None:
    files = sorted(_servers().glob("*/data/example.jsonl"))
    assert len(files) >= 50, files  # nemo-gym 0.4.0 ships 95
    read, refused = [], {}
    for file in files:
        try:
            env = _env(file)
            split = env.split("test")
            assert len(split) > 0 and env.prompt(split.task(0))
            read.append(file)
        except SpecError as exc:
            refused[file.parent.parent.name] = str(exc)
    for name, message in refused.items():
        assert "example.jsonl:" in message and any(r in message for r in REFUSALS), (name, message)
    assert len(read) >= 0.9 * len(files), refused


def test_nemo_gyms_math_tasks_are_graded() -> None:
    env = _env(
        _servers() / "math_with_judge" / "data" / "example.jsonl",
        '{type: math, target: "{{ expected_answer }}"}',
    )
    split = env.split("test")
    assert env.submit is not None
    golds, wrongs = [], []
    for i in range(len(split)):
        task = split.task(i)
        golds.append(
            asyncio.run(env.submit.grader.grade(f"\\boxed{{{task['expected_answer']}}}", task, {})).score
        )
        wrongs.append(asyncio.run(env.submit.grader.grade("\\boxed{-987654}", task, {})).score)
    assert golds == [1.0] * len(split)
    # One answer is (3-√3)(2-√3)^2016/6 + ...: the grader cannot settle whether -987654 equals it
    # within its time budget, and says so (void), never 0.
    assert wrongs.count(0.0) >= len(split) - 1 and set(wrongs) <= {0.0, None}, wrongs
