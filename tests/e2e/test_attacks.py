"""End to end against real servers: the second round of attacks (issue 22) no longer freezes,
starves, forges or fills anything. Each test fails on the server as it was before that issue.

Timing claims are ordering checks: "the honest answer is graded while the hostile one still
runs", "/health answers while a check runs", never "within N seconds" of a loaded machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app, uvicorn_options
from envbuilder.server._calls import SHUTTING_DOWN
from tests.conftest import ENVS
from tests.processes import serve_process, wait_healthy
from tests.servers import free_port, serve_app

FREEZE = "9^{9^{9^{9}}}"
"""One big-integer power inside SymPy (against test-5's ``42``): minutes in one C call holding
the interpreter."""
STARVE = "(1+x)^{3000}"
"""An expansion (against test-1's ``p - q``) that runs far past the check's deadline."""
SYMBOLIC = "(3, \\pi/2)"
"""math500 test-0's answer written so that only the symbolic check can tell it is right."""


def _episode(client: httpx.Client, answer: str, index: int = 0, key: str | None = None) -> dict[str, Any]:
    """Create a math500 session on test[index], submit ``answer``; the tool output."""
    sid = uuid.uuid4().hex
    h = {"X-Session-ID": sid, **({"X-API-Key": key} if key else {})}
    r = client.post("/create", headers=h, json={"env_name": "math500", "split": "test", "index": index})
    assert r.status_code == 200, r.text
    r = client.post(
        "/math500/call", headers=h, json={"name": "submit", "input": {"answer": answer}}, timeout=600
    )
    assert r.status_code == 200, r.text
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    import json

    out: dict[str, Any] = json.loads(events[-1])["output"]
    return out


@contextlib.contextmanager
def _math_server(
    *extra: str, processes: int = 2, check_seconds: float | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``envbuilder serve`` of math500 (its grader's ``timeout`` set to ``check_seconds``)."""
    with tempfile.TemporaryDirectory(prefix="eb-math500-") as folder:
        spec = ENVS / "math500.yaml"
        if check_seconds is not None:
            text = spec.read_text().replace("data/", f"{ENVS}/data/")
            text = text.replace(
                '  target: "{{ answer }}"\n', f'  target: "{{{{ answer }}}}"\n  timeout: {check_seconds}\n'
            )
            assert f"timeout: {check_seconds}" in text
            spec = Path(folder) / "math500.yaml"
            spec.write_text(text)
            extra = (*extra, "--data-root", str(ENVS / "data"))
        with serve_process(str(spec), *extra, env={"ENVBUILDER_GRADING_PROCESSES": str(processes)}) as served:
            yield served


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_freezing_answer_neither_freezes_the_server_nor_holds_sigterm() -> None:
    # The freezing check runs to its deadline (a minute here): the honest answer, sent a second
    # after it, must be graded while it still runs, however slow the machine.
    with _math_server("--graceful-timeout", "2", check_seconds=60) as (url, proc):
        done = threading.Event()
        hostile: list[str] = []

        def submit() -> None:
            h = {"X-Session-ID": uuid.uuid4().hex}
            with contextlib.suppress(httpx.HTTPError), httpx.Client(base_url=url, timeout=600) as c:
                body = {"env_name": "math500", "split": "test", "index": 5}
                assert c.post("/create", headers=h, json=body).status_code == 200
                call = {"name": "submit", "input": {"answer": FREEZE}}
                hostile.append(c.post("/math500/call", headers=h, json=call).text)
            done.set()

        threading.Thread(target=submit, daemon=True).start()
        with httpx.Client(base_url=url, timeout=60) as c:
            time.sleep(1.0)  # the check is running in a grading process by now
            for _ in range(20):
                assert c.get("/health").status_code == 200
            honest = _episode(c, SYMBOLIC)
            assert not done.is_set()  # answered while the freezing check still runs
        assert honest["reward"] == 1.0 and honest["metadata"]["outcome"] == "correct"
        workers = _children(proc.pid)
        assert workers  # the grading processes
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)  # the old server ignored SIGTERM for over 12 minutes
        # The frozen answer's call was stopped, not graded: its stream says so (docs/protocol.md §4.2).
        assert done.wait(10) and hostile[0].endswith(f"event: error\r\ndata: {SHUTTING_DOWN}\r\n\r\n")
        for pid in workers:
            for _ in range(100):
                if not _alive(pid):
                    break
                time.sleep(0.05)
            assert not _alive(pid), "a grading process outlived the server"


def test_starving_answers_do_not_make_an_honest_answer_ungradeable() -> None:
    hoarder, honest_key = "k-starver-0123456789abcdef", "k-honest-0123456789abcdefg"
    keys = ("--api-key", hoarder, "--api-key", honest_key)
    with _math_server(*keys, processes=2) as (url, _):
        hostile: list[dict[str, Any]] = []

        def submit() -> None:
            with httpx.Client(base_url=url, timeout=600) as c:
                hostile.append(_episode(c, STARVE, index=1, key=hoarder))

        threads = [threading.Thread(target=submit, daemon=True) for _ in range(8)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        with httpx.Client(base_url=url, timeout=600) as c:
            honest_number = _episode(c, "9", index=3, key=honest_key)
            honest = _episode(c, SYMBOLIC, key=honest_key)  # the grading processes: its turn next
        finished_before = len(hostile)
        for t in threads:
            t.join(600)
        assert honest_number["reward"] == 1.0
        assert honest["reward"] == 1.0, honest["metadata"]
        assert finished_before < 8  # graded ahead of the queue of hostile checks
        assert all(h["reward"] is None for h in hostile)
        assert all("took over" in h["metadata"]["reason"] for h in hostile)


# -- forged tasks -------------------------------------------------------------------------------


def _submit(client: httpx.Client, sid: str, answer: str) -> dict[str, Any]:
    import json

    r = client.post(
        "/gsm8k/call", headers={"X-Session-ID": sid}, json={"name": "submit", "input": {"answer": answer}}
    )
    assert r.status_code == 200, r.text
    out: dict[str, Any] = json.loads([x for x in r.text.splitlines() if x.startswith("data: ")][-1][6:])[
        "output"
    ]
    return out


def test_a_client_cannot_choose_the_gold_of_a_served_task(gsm8k: Environment) -> None:
    task = gsm8k.split("test").task(0)
    gold = task["answer"].split("####")[-1].strip()
    assert gold != "5"
    with serve_app(create_app([gsm8k])) as url, httpx.Client(base_url=url) as c:
        for forged in ({**task, "answer": "#### 5"}, {**gsm8k.public(task), "answer": "#### 5"}):
            sid = uuid.uuid4().hex
            r = c.post("/create", headers={"X-Session-ID": sid}, json={"task_spec": forged})
            assert r.status_code == 200
            out = _submit(c, sid, "5")
            assert (out["reward"], out["metadata"]["outcome"]) == (0.0, "incorrect")
        # A task that names no served row is refused unless the operator allows client tasks.
        made_up = {**task, "id": "my-own-7", "answer": "#### 5"}
        r = c.post("/create", headers={"X-Session-ID": uuid.uuid4().hex}, json={"task_spec": made_up})
        assert r.status_code == 403 and "--client-tasks" in r.json()["detail"]
    settings = ServerSettings(client_tasks=True)
    with serve_app(create_app([gsm8k], settings)) as url, httpx.Client(base_url=url) as c:
        sid = uuid.uuid4().hex
        assert (
            c.post("/create", headers={"X-Session-ID": sid}, json={"task_spec": made_up}).status_code == 200
        )
        assert _submit(c, sid, "5")["reward"] == 1.0  # the client's own task, its own gold
        sid = uuid.uuid4().hex  # still never under a served id
        c.post("/create", headers={"X-Session-ID": sid}, json={"task_spec": {**task, "answer": "#### 5"}})
        assert _submit(c, sid, "5")["reward"] == 0.0


# -- session hoarding -----------------------------------------------------------------------------

KEYS = ("k-hoarder-0123456789abcdef", "k-honest-0123456789abcdefg")


def _create(client: httpx.Client, key: str) -> httpx.Response:
    h = {"X-Session-ID": uuid.uuid4().hex, "X-API-Key": key}
    return client.post("/create", headers=h, json={"split": "test", "index": 0})


@pytest.mark.parametrize("store", ["memory", "redis"])
def test_one_key_cannot_hoard_every_session(
    gsm8k: Environment, store: str, request: pytest.FixtureRequest
) -> None:
    url_of_store = "memory" if store == "memory" else request.getfixturevalue("redis_url")
    settings = ServerSettings(api_keys=KEYS, max_sessions=6, max_sessions_per_client=4, store=url_of_store)
    with serve_app(create_app([gsm8k], settings)) as url, httpx.Client(base_url=url) as c:
        made = [_create(c, KEYS[0]) for _ in range(6)]
        assert [r.status_code for r in made] == [200] * 4 + [429] * 2
        assert made[-1].headers["retry-after"] and "maximum of 4" in made[-1].json()["detail"]
        assert [_create(c, KEYS[1]).status_code for _ in range(3)] == [200, 200, 503]  # the server's cap
        # A deleted session frees its place, in the memory store and in Redis alike.
        sid = made[0].json()["sid"]
        assert c.post("/delete", headers={"X-Session-ID": sid, "X-API-Key": KEYS[0]}).status_code == 200
        assert _create(c, KEYS[0]).status_code == 200


# -- a store that refuses writes ----------------------------------------------------------------


def _redis(port: int, *args: str) -> bytes:
    payload = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a.encode()) for a in args)
    with socket.create_connection(("127.0.0.1", port), 2) as s:
        s.sendall(payload)
        return s.recv(4096)


def test_a_store_out_of_memory_gives_503_and_health_says_so(gsm8k: Environment, redis_url: str) -> None:
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    settings = ServerSettings(store=redis_url)
    with serve_app(create_app([gsm8k], settings)) as url, httpx.Client(base_url=url) as c:
        sid = uuid.uuid4().hex
        assert (
            c.post("/create", headers={"X-Session-ID": sid}, json={"split": "test", "index": 0}).status_code
            == 200
        )
        assert c.get("/health").status_code == 200
        assert _redis(port, "CONFIG", "SET", "maxmemory", "1").startswith(b"+OK")
        try:
            r = c.post(
                "/create", headers={"X-Session-ID": uuid.uuid4().hex}, json={"split": "test", "index": 0}
            )
            assert r.status_code == 503 and r.headers["retry-after"]
            assert "out of memory" in r.json()["detail"]
            r = c.post(
                "/gsm8k/call",
                headers={"X-Session-ID": sid},
                json={"name": "submit", "input": {"answer": "1"}},
            )
            assert r.status_code == 503 and r.headers["retry-after"]
            r = c.get("/health")
            assert r.status_code == 503 and r.json() == {"status": "unavailable", "store": "out of memory"}
            assert r.headers["retry-after"]
        finally:
            _redis(port, "CONFIG", "SET", "maxmemory", "0")
        assert c.get("/health").status_code == 200
        assert _submit(c, sid, "1")["metadata"]["outcome"] == "incorrect"


# -- connection slots ---------------------------------------------------------------------------


def test_idle_keep_alive_connections_cannot_hold_every_slot(gsm8k: Environment) -> None:
    settings = ServerSettings(max_connections=20)
    with serve_app(create_app([gsm8k], settings), **uvicorn_options(settings)) as url:
        holders = [httpx.Client(base_url=url) for _ in range(20)]
        try:
            for h in holders:
                h.get("/health")  # each keeps its connection open, idle between pings
            with httpx.Client(base_url=url) as honest:
                r = honest.post("/gsm8k/num_tasks", json={"split": "test"})
                assert r.status_code == 200, r.text
        finally:
            for h in holders:
                h.close()


def test_idle_sockets_are_closed_at_once_past_the_cap() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envbuilder",
            "serve",
            str(ENVS / "gsm8k.yaml"),
            "--port",
            str(port),
            "--max-connections",
            "50",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    sockets: list[socket.socket] = []
    try:
        wait_healthy(url, proc)
        before = len(os.listdir(f"/proc/{proc.pid}/fd"))
        for _ in range(400):
            sockets.append(socket.create_connection(("127.0.0.1", port)))
        time.sleep(0.5)
        held = len(os.listdir(f"/proc/{proc.pid}/fd")) - before
        assert held <= 60, f"the server holds {held} idle sockets"
        assert httpx.get(url + "/health").status_code == 200
    finally:
        for s in sockets:
            s.close()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


# -- loop-free templates ------------------------------------------------------------------------

SLOW_TEMPLATE = """\
name: wrap
dataset:
  type: parquet
  files: {test: data/gsm8k/test-00000-of-00001.parquet}
splits: {test: {}}
prompt: {template: "{% set q = question*4 %}{{ (q~q~q~q) | list | map('upper') | map('lower') | join }}"}
grader: {type: exact_match, target: "{{ answer }}"}
limits: {render_seconds: 0.3}
"""


def test_a_loop_free_template_on_a_long_task_is_cut_off_off_the_loop() -> None:
    from envbuilder.spec import parse_spec

    env = Environment(parse_spec(SLOW_TEMPLATE, file="wrap.yaml", base_dir=ENVS))
    settings = ServerSettings(client_tasks=True)
    # The shipped rows render in milliseconds (the load-time check passes on a loaded machine);
    # this one (1.9M characters, from 120 KB within the 256 KB task limit: Python per character)
    # takes about 3 s, ten times the budget.
    long_task = {"id": "long-1", "question": "ab " * 40000, "answer": "1"}
    with serve_app(create_app([env], settings)) as url, httpx.Client(base_url=url, timeout=60) as c:
        sid = uuid.uuid4().hex
        assert (
            c.post("/create", headers={"X-Session-ID": sid}, json={"task_spec": long_task}).status_code == 200
        )
        answered: list[float] = []
        stop = threading.Event()

        def probe() -> None:
            with httpx.Client(base_url=url, timeout=60) as p:
                while not stop.is_set():
                    assert p.get("/health").status_code == 200
                    answered.append(time.monotonic())

        prober = threading.Thread(target=probe)
        prober.start()
        time.sleep(0.1)
        began = time.monotonic()
        r = c.get("/wrap/prompt", headers={"X-Session-ID": sid})
        ended = time.monotonic()
        stop.set()
        prober.join()
    template = env.prompter.template if env.prompter else None
    why = (getattr(template, "bounded", None), getattr(template, "seconds", None), r.text[:80])
    # The client's own task (--client-tasks): its data is at fault, so a 422.
    assert r.status_code == 422 and "rendering took longer than 0.3 s" in r.json()["detail"], why
    assert sum(began < t < ended for t in answered) >= 2  # /health answered while it rendered
