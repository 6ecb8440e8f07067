"""Scripted policies for the eval tests: chat-completions handlers that answer GSM8K tasks."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from envbuilder.environment import Environment
from tests.fakes.chat_server import tool_call_reply

N = 6
KEY = "sk-test-must-never-leak-1234"
Answers = dict[str, tuple[int, str]]


@pytest.fixture(scope="session")
def answers(gsm8k: Environment) -> Answers:
    """question → (index, gold answer), from the first 16 tasks of GSM8K's test split."""
    tasks = gsm8k.split("test").task_range(0, 16)
    return {t["question"]: (i, t["answer"].split("####")[-1].strip()) for i, t in enumerate(tasks)}


def question(request: dict[str, Any], answers: Answers) -> tuple[int, str]:
    prompt = next(m["content"] for m in request["messages"] if m["role"] == "user")
    return next(v for q, v in answers.items() if q in prompt)


def submit(answer: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    return 200, tool_call_reply("submit", json.dumps({"answer": answer})), {}


def right_when(answers: Answers, good: Callable[[int], bool]):
    """Right on the tasks whose index satisfies ``good``, wrong on the others."""

    def handler(req: dict[str, Any], i: int):
        index, gold = question(req, answers)
        return submit(gold if good(index) else "-987654")

    return handler


def right_first(answers: Answers, correct: dict[int, int]):
    """Right on the first ``correct[index]`` requests for each task, wrong after (for samples)."""
    seen: dict[int, int] = {}
    lock = threading.Lock()

    def handler(req: dict[str, Any], i: int):
        index, gold = question(req, answers)
        with lock:
            n = seen[index] = seen.get(index, 0) + 1
        return submit(gold if n <= correct.get(index, 0) else "-1")

    return handler


ARITHMETIC = """\
name: {name}
dataset:
  type: parquet
  files:
    test: data/{name}.parquet
splits:
  test: {{type: test}}
prompt:
  template: "What is {{{{ n }}}} {name}d? Answer with the number."
grader:
  type: exact_match
  target: "{{{{ value }}}}"
  extract: number
{extra}"""
POWERS = {"square": 2, "cube": 3}


def write_arithmetic(folder, names=("square", "cube"), rows: int = 6, extra: str = ""):
    """Specs ``square.yaml`` and ``cube.yaml`` (``What is 3 squared?``) with ``rows`` tasks each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / "data").mkdir(parents=True, exist_ok=True)
    for name in names:
        ns = list(range(2, 2 + rows))
        table = pa.table({"n": ns, "value": [str(n ** POWERS[name]) for n in ns],
                          "parity": ["even" if n % 2 == 0 else "odd" for n in ns]})  # fmt: skip
        pq.write_table(table, folder / "data" / f"{name}.parquet")
        (folder / f"{name}.yaml").write_text(ARITHMETIC.format(name=name, extra=extra))
    (folder / "data" / "LICENSE").write_text("CC0-1.0 test data\n")
    return folder


def arithmetic_answer(prompt: str, wrong: Callable[[str, int], bool] = lambda kind, n: False) -> str:
    """The right answer to ``What is N squared/cubed?`` (or a wrong one where ``wrong(kind, n)``)."""
    import re

    found = re.search(r"What is (\d+) (square|cube)d\?", prompt)
    assert found, prompt
    n, kind = int(found[1]), found[2]
    return str(n ** POWERS[kind] + (1 if wrong(kind, n) else 0))


def prompt_of(request: dict[str, Any]) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")
