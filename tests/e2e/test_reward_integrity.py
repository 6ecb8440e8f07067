"""End to end: each reward-integrity defect of issue 23, through a real uvicorn server.

HumanEval's reward hacks (``os._exit(0)``, always-equal objects) score 0 and a first attempt's
metadata does not show the hidden tests; MATH-500's worked ``solution`` and the digits'
``label`` are never served by ``/task``, ``/task_range`` or ``/tasks``.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from envbuilder.environment import load_environment
from envbuilder.server import ServerSettings, create_app
from tests.conftest import ENVS
from tests.servers import serve_app


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    envs = [load_environment(ENVS / f"{name}.yaml") for name in ("humaneval", "math500", "digits")]
    with serve_app(create_app(envs, ServerSettings(ping_interval=0.2))) as base:
        yield base


def _episode(client: httpx.Client, env: str, index: int, answers: list[str]) -> list[dict[str, object]]:
    """Submit ``answers`` in turn on one session of ``env``'s test[index]; each tool output."""
    h = {"X-Session-ID": uuid.uuid4().hex}
    r = client.post("/create", headers=h, json={"env_name": env, "split": "test", "index": index})
    assert r.status_code == 200, r.text
    outputs = []
    for answer in answers:
        r = client.post(f"/{env}/call", headers=h, json={"name": "submit", "input": {"answer": answer}})
        assert r.status_code == 200, r.text
        end = r.text.split("event: end\r\ndata: ", 1)[1].split("\r\n", 1)[0]
        outputs.append(json.loads(end)["output"])
    client.post("/delete", headers=h)
    return outputs


HACKS = {
    "os._exit(0)": "    import os\n    os._exit(0)\n",
    "sys.exit(0) at import": "import sys\nsys.exit(0)\n",
    "always equal": (
        "    class Yes:\n        def __eq__(self, other):\n            return True\n"
        "        def __ne__(self, other):\n            return False\n    return Yes()\n"
    ),
    "always-equal bool": (
        "    class T(int):\n        def __eq__(self, other):\n            return True\n    return T(1)\n"
    ),
    "rewrite the tests": "    open('tests.py', 'w').write('def check(c):\\n    pass\\n')\n    return True\n",
}


@pytest.mark.parametrize("answer", HACKS.values(), ids=HACKS.keys())
def test_humaneval_reward_hacks_score_zero(url: str, answer: str) -> None:
    with httpx.Client(base_url=url, timeout=60) as c:
        (output,) = _episode(c, "humaneval", 0, [answer])
    assert output["reward"] == 0.0, output["metadata"]


def test_a_first_attempt_does_not_show_the_hidden_tests(tmp_path: Path) -> None:
    # HumanEval with two attempts: the first answer fails on purpose and reads its metadata.
    spec = (ENVS / "humaneval.yaml").read_text(encoding="utf-8")
    spec = spec.replace("\nsubmit:\n", "\nsubmit:\n  max_attempts: 2\n")
    shutil.copytree(ENVS / "data" / "humaneval", tmp_path / "data" / "humaneval")
    (tmp_path / "humaneval2.yaml").write_text(spec, encoding="utf-8")
    env = load_environment(tmp_path / "humaneval2.yaml")
    test_code = env.split("test").task(0)["test"]
    wrong = "    print('my own output')\n    return numbers == threshold\n"
    app = create_app([env], ServerSettings(ping_interval=0.2))
    with serve_app(app) as base, httpx.Client(base_url=base, timeout=60) as c:
        first, second = _episode(c, "humaneval", 0, [wrong, wrong])
    assert first["finished"] is False, first
    shown = json.dumps(first)
    assert "run" not in first["metadata"], first["metadata"]
    assert "METADATA" not in shown and "candidate(" not in shown
    assert all(line.strip() not in shown for line in test_code.splitlines() if len(line.strip()) > 12)
    assert first["metadata"]["reason"] == "a test failed: AssertionError"
    assert second["finished"] is True and second["reward"] == 0.0


@pytest.mark.parametrize(("env", "hidden"), [("math500", "solution"), ("digits", "label")])
def test_gold_fields_are_never_served(url: str, env: str, hidden: str) -> None:
    with httpx.Client(base_url=url, timeout=60) as c:
        one = c.post(f"/{env}/task", json={"split": "test", "index": 0})
        page = c.post(f"/{env}/task_range", json={"split": "test", "start": 0, "stop": 50})
        listed = c.post(f"/{env}/tasks", json={"split": "test"})
    for r in (one, page, listed):
        assert r.status_code == 200, r.text
        text = r.text
        assert f'"{hidden}"' not in text and '"answer"' not in text, text[:500]


# The math answers written as other harnesses write them: (gold, answer, reward).
MATH_CASES = [
    ("12000023", "Final Answer: The final answer is 12,000,023. I hope it is correct.", 1.0),
    ("34", "Final Answer: The largest $n$ is 34.", 1.0),
    ("10455", "So far \\boxed{255}. Then $10,200 + $255 = $10,455. The final answer is $10,455$.", 1.0),
    ("\\{1,2,3\\}", "\\boxed{1}, \\boxed{2}, \\boxed{3}", 1.0),
    ("k = 45, n = 2", "\\boxed{k = 45} \\quad \\text{and} \\quad \\boxed{n = 2}", 1.0),
    ("2x+4y-3=0", "$y=-\\frac{1}{2}x+\\frac{3}{4}$", 1.0),
    ("2x+4y-3=0", "$y=-\\frac{1}{2}x+\\frac{1}{4}$", 0.0),
    ("4.123105625617661", "\\sqrt{17}", 1.0),
    ("4.12", "\\sqrt{17}", 0.0),
    ("25", "twenty-five", 1.0),
    ("105", "one hundred and five", 1.0),
    ("42", "答案是 42", 1.0),
    ("42", "La respuesta es 42.", 1.0),
    ("\\frac{1}{2}", "Die Antwort ist $\\frac{1}{2}$.", 1.0),
    ("3", "\\boxed{3} or \\boxed{4}", 0.0),
    ("3", "The answer is 3 or 4.", 0.0),
]


@pytest.fixture(scope="module")
def math_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("issue23_math")
    rows = [{"question": f"q{i}", "answer": gold} for i, (gold, _, _) in enumerate(MATH_CASES)]
    (folder / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (folder / "m.yaml").write_text(
        "name: m\ndataset: {type: jsonl, files: {test: cases.jsonl}}\nsplits: {test: {type: test}}\n"
        'prompt: {template: "{{ question }}"}\ngrader: {type: math, target: "{{ answer }}"}\n',
        encoding="utf-8",
    )
    env = load_environment(folder / "m.yaml")
    with serve_app(create_app([env], ServerSettings(ping_interval=0.2))) as base:
        yield base


@pytest.mark.parametrize("index", range(len(MATH_CASES)), ids=[c[1][:40] for c in MATH_CASES])
def test_answers_as_other_harnesses_write_them(math_url: str, index: int) -> None:
    pytest.importorskip("math_verify")
    gold, answer, reward = MATH_CASES[index]
    with httpx.Client(base_url=math_url, timeout=60) as c:
        (output,) = _episode(c, "m", index, [answer])
    assert output["reward"] == reward, (gold, answer, output["metadata"])
