"""End to end: ``envs/humaneval.yaml`` served by a real uvicorn, answers run in each real
sandbox backend (bubblewrap, Docker, Podman: tests/sandboxes.py), every test on each.

Every canonical solution scores 1.0 through the server; both reference clients grade
episodes; and answers that attack the sandbox are contained while other sessions are served.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment, load_environment
from envbuilder.isolation.sandbox import default_concurrency
from envbuilder.server import ServerSettings, create_app
from tests.conftest import ENVS, ROOT
from tests.sandboxes import BACKENDS, configured
from tests.servers import serve_app

SECRET = "sk-server-secret-do-not-leak"


@pytest.fixture(scope="module")
def humaneval() -> Environment:
    return load_environment(ENVS / "humaneval.yaml")


@pytest.fixture(scope="module", params=BACKENDS)
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    # A secret in the server's environment: the sandbox must not see it.
    os.environ["ENVBUILDER_TEST_SERVER_SECRET"] = SECRET
    try:
        with configured(request.param):  # the grader takes the configured backend when loaded
            served = load_environment(ENVS / "humaneval.yaml")
            with serve_app(create_app([served], ServerSettings(ping_interval=0.2))) as base:
                yield base
    finally:
        del os.environ["ENVBUILDER_TEST_SERVER_SECRET"]


def _submit(client: httpx.Client, index: int, answer: str) -> tuple[dict[str, Any], str]:
    """Open a session on test[index], submit ``answer``; (the tool result, the raw SSE text)."""
    h = {"X-Session-ID": uuid.uuid4().hex}
    r = client.post("/create", headers=h, json={"split": "test", "index": index})
    assert r.status_code == 200, r.text
    r = client.post("/humaneval/call", headers=h, json={"name": "submit", "input": {"answer": answer}})
    assert r.status_code == 200, r.text
    end = r.text.split("event: end\r\ndata: ", 1)[1].split("\r\n", 1)[0]
    client.post("/delete", headers=h)
    return json.loads(end), r.text


def test_all_canonical_solutions_score_one(url: str, humaneval: Environment) -> None:
    view = humaneval.split("test")
    solutions = [view.task(i)["canonical_solution"] for i in range(len(view))]
    assert len(solutions) == 164

    def one(i: int) -> tuple[int, float | None, str]:
        with httpx.Client(base_url=url, timeout=60) as c:
            result, _ = _submit(c, i, solutions[i])
        output = result["output"]
        return i, output["reward"], output["metadata"]["reason"]

    # More callers than sandbox slots: the server's queue, not the test, sets the pace.
    with ThreadPoolExecutor(max_workers=2 * default_concurrency()) as pool:
        results = list(pool.map(one, range(len(solutions))))
    failed = [r for r in results if r[1] != 1.0]
    assert not failed, failed


def test_grading_streams_keep_alives_and_says_why(url: str) -> None:
    with httpx.Client(base_url=url, timeout=60) as c:
        result, text = _submit(c, 0, "    while True:\n        pass\n")
    output = result["output"]
    assert output["reward"] == 0.0 and output["finished"] is True
    assert output["metadata"]["outcome"] == "incorrect"
    # The loop is stopped by the run's wall time or, on a quiet machine where its CPU time keeps
    # pace, by the CPU limit of the answer's own process, whichever comes first: no reward
    # either way, and the reason says which (test_sandbox_effects's hoarder takes the same two;
    # tests/graders/test_harness_endings.py makes each one happen alone).
    reason = output["metadata"]["reason"]
    assert reason.startswith("timeout: ") or reason == (
        "cpu time limit: the code used its 5 s of CPU time and was killed"
    ), reason
    assert ": ping - " in text  # 5 s of running, pings every 0.2 s


# -- both reference clients ----------------------------------------------------------------------


def test_ors_sdk_grades_humaneval_episodes(url: str, humaneval: Environment) -> None:
    from ors.client import ORS

    task = humaneval.split("test").task(2)
    with ORS(base_url=url) as client:
        env = client.environment("humaneval")
        assert [t.name for t in env.list_tools()] == ["submit"]
        with env.session(split="test", index=2) as s:
            assert task["prompt"] in s.get_prompt()[0].text
            fenced = f"Here it is:\n```python\n{task['prompt']}{task['canonical_solution']}```\nDone."
            out = s.call_tool("submit", {"answer": fenced})
            assert (out.reward, out.finished) == (1.0, True)
        with env.session(split="test", index=2) as s:
            out = s.call_tool("submit", {"answer": "    return 0\n"})
            assert out.reward == 0.0 and "AssertionError" in out.metadata["reason"]


def test_openreward_grades_humaneval_episodes(url: str, humaneval: Environment) -> None:
    from openreward import EnvironmentsAPI

    task = humaneval.split("test").task(3)
    api = EnvironmentsAPI(base_url=url, api_key=None)
    try:
        env = api.get(name="humaneval", variant="humaneval")
        with env.session(split="test", index=3) as s:
            assert task["entry_point"] in s.get_messages()[0].blocks[0].text
            out = s.call_tool("submit", {"answer": task["canonical_solution"]})
            assert (out.reward, out.finished) == (1.0, True)
        with env.session(split="test", index=3) as s:
            out = s.call_tool("submit", {"answer": "def broken(:\n"})
            assert out.reward == 0.0 and "SyntaxError" in out.metadata["reason"]
    finally:
        close = getattr(api, "close", None)
        if close is not None:
            close()


# -- security: each attempt is contained and says what happened ----------------------------------

# Each answer completes `has_close_elements` (test[0]); it reports what it saw by failing with
# a message, or passes (reward 1) only when the attack did nothing.
ATTACKS: dict[str, tuple[str, str]] = {
    "read server files": (
        "    import os\n"
        f"    seen = [p for p in ({str(ROOT)!r}, '/root', '/etc/shadow')\n"
        "            if os.path.exists(p) and os.access(p, os.R_OK)]\n"
        "    seen += [p for p in ('/home',) if os.path.isdir(p) and os.listdir(p)]\n"
        "    assert not seen, seen\n"
        "    raise SystemExit('isolated')\n",
        "isolated",
    ),
    "read server env vars": (
        "    import os\n"
        "    env = dict(os.environ)\n"
        "    for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
        "        try:\n"
        "            raw = open(f'/proc/{pid}/environ').read()\n"
        "        except OSError:\n"
        "            continue\n"
        "        env.update(x.split('=', 1) for x in raw.split('\\0') if '=' in x)\n"
        "    assert not any('SECRET' in k or 'sk-' in v for k, v in env.items()), env\n"
        "    raise SystemExit('no secrets')\n",
        "no secrets",
    ),
    "write outside its folder": (
        "    for p in ('/usr/evil', '/etc/evil', '/evil'):\n"
        "        try:\n"
        "            open(p, 'w')\n"
        "        except OSError:\n"
        "            continue\n"
        "        raise SystemExit('wrote ' + p)\n"
        "    raise SystemExit('read-only')\n",
        "read-only",
    ),
    "open a network connection": (
        "    import socket\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n",
        "Network is unreachable",
    ),
    "signal the server": (
        f"    import os\n    os.kill({os.getpid()}, 9)\n",
        "ProcessLookupError",
    ),
    "fill the disk": (
        "    open('big', 'wb').write(b'x' * (200 * 1024 * 1024))\n",
        "No space left on device",
    ),
    "exhaust memory": ("    x = bytearray(16 * 1024 ** 3)\n", "memory limit"),
    "exhaust pids": ("    import os\n    while True:\n        os.fork()\n", "process limit"),
    "flood the output": ("    while True:\n        print('x' * 10000)\n", "output limit"),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_is_contained(url: str, name: str) -> None:
    answer, expected = ATTACKS[name]
    with httpx.Client(base_url=url, timeout=60) as c:
        result, _ = _submit(c, 0, answer)
        output = result["output"]
        assert output["reward"] == 0.0, output["metadata"]
        assert expected in output["metadata"]["reason"], output["metadata"]
        assert SECRET not in json.dumps(result)
        # The server still serves another session, and grades it right.
        good, _ = _submit(
            c,
            0,
            "    return any(abs(a - b) < threshold for i, a in enumerate(numbers)"
            " for b in numbers[i + 1:])\n",
        )
        assert good["output"]["reward"] == 1.0


def test_no_process_outlives_its_run(url: str) -> None:
    marker = uuid.uuid4().hex
    answer = (
        "    import subprocess\n"
        "    sleeper = ['python3', '-c', 'import time; time.sleep(300)', "
        f"'{marker}']\n"
        "    alive = subprocess.Popen(sleeper, start_new_session=True)\n"
        "    subprocess.Popen(['sh', '-c', 'nohup \"$@\" &', 'sh', *sleeper])\n"
        "    import time\n"
        "    time.sleep(0.3)\n"
        "    assert alive.poll() is None\n"
        "    raise SystemExit('spawned')\n"
    )
    with httpx.Client(base_url=url, timeout=60) as c:
        result, _ = _submit(c, 0, answer)
    assert "spawned" in result["output"]["metadata"]["reason"]
    time.sleep(0.2)
    left = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    left.append(pid)
        except OSError:
            continue
    assert not left


def test_a_long_run_does_not_stall_other_sessions(url: str) -> None:
    """While a run loops for its whole wall limit, discovery and prompts answer at once."""
    with ThreadPoolExecutor(max_workers=1) as pool, httpx.Client(base_url=url, timeout=60) as c:
        slow = pool.submit(_submit, c, 0, "    while True:\n        pass\n")
        time.sleep(0.5)
        for _ in range(5):
            assert c.get("/humaneval/splits").status_code == 200
        assert not slow.done()  # answered while the run still loops (an ordering, not a time)
        # Stopped by its wall time or its CPU limit (as in the test above); either way graded.
        reason = slow.result()[0]["output"]["metadata"]["reason"]
        assert reason.startswith(("timeout: ", "cpu time limit: ")), reason
