"""A server stopped (Ctrl-C, SIGTERM) while a tool call's event stream is open: the stream ends at
once with an ``error`` event (the call void, never a grade), the server exits well within its
graceful timeout, and its log holds no traceback; a second Ctrl-C exits at once, as quietly. With a
shared store, the call is taken over on another replica when its client re-attaches by task_id."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from envbuilder.server._calls import SHUTTING_DOWN
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, completion
from tests.processes import wait_healthy
from tests.servers import free_port

GRACE = 30
"""The servers' --graceful-timeout: an open stream that held the shutdown would hold it this long."""
DATA = ENVS / "data" / "gsm8k" / "test-00000-of-00001.parquet"
SHUTDOWN_ERROR = f"event: error\r\ndata: {SHUTTING_DOWN}\r\n\r\n"
CALL = {"name": "submit", "input": {"answer": "18"}}
H = {"X-Session-ID": "s"}


@pytest.fixture
def judge() -> Iterator[ChatServer]:
    """A judge whose first answer waits until the test ends (at most 120 s); the others come at once."""
    released = threading.Event()

    def answer(body: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        if i == 0:
            released.wait(120)
        return 200, completion("Matches.\nVERDICT: CORRECT"), {}

    with ChatServer(answer) as chat:
        yield chat
        released.set()


@contextlib.contextmanager
def _server(spec: Path, log: Path, *extra: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``envbuilder serve`` with SIGINT as a terminal gives it (a background `cmd &` ignores it)."""
    port = free_port()
    args = [sys.executable, "-m", "envbuilder", "serve", str(spec), "--port", str(port)]
    args += ["--graceful-timeout", str(GRACE), "--data-root", str(DATA.parent), *extra]
    with log.open("wb") as out:
        process = subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def _open_call(url: str, judge: ChatServer) -> tuple[threading.Thread, dict[str, Any]]:
    """Start a call in a thread that reads its whole stream; return once the judge is asked."""
    assert httpx.post(url + "/create", headers=H, json={"split": "test", "index": 0}).status_code == 200
    got: dict[str, Any] = {}

    def read() -> None:
        try:
            with httpx.stream("POST", url + "/judged/call", headers=H, json=CALL, timeout=GRACE * 3) as r:
                got["text"] = "".join(r.iter_text())
        except httpx.HTTPError as exc:
            got["error"] = exc

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while not judge.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    assert judge.requests, "the call never reached the judge"
    return reader, got


def _task_id(text: str) -> str:
    assert text.startswith("event: task_id\r\ndata: "), text
    return text.split("data: ", 1)[1].split("\r\n", 1)[0]


@pytest.mark.parametrize("signals", [[signal.SIGINT], [signal.SIGTERM], [signal.SIGINT, signal.SIGINT]])
def test_stopping_ends_an_open_call_stream_with_an_error(
    tmp_path: Path, judge: ChatServer, judged: Callable[..., str], signals: list[signal.Signals]
) -> None:
    spec = tmp_path / "judged.yaml"
    spec.write_text(judged(judge.base_url, data=DATA, cache=False))
    log = tmp_path / "serve.log"
    with _server(spec, log) as (url, process):
        reader, got = _open_call(url, judge)
        for sig in signals:
            process.send_signal(sig)
            time.sleep(0.2)
        # Well within the graceful timeout: the open stream did not hold the shutdown. (uvicorn
        # raises the signal again once it has stopped: SIGTERM's default ends the process.)
        assert process.wait(GRACE - 10) in (0, -signals[0])
        reader.join(10)
    assert "error" not in got, got  # a whole stream, not one cut short
    text = got["text"]
    _task_id(text)
    assert text.endswith(SHUTDOWN_ERROR), text
    assert "event: end" not in text
    output = log.read_text()
    assert "Traceback" not in output and "ERROR" not in output, output


def test_a_call_stopped_by_shutdown_is_graded_on_another_replica(
    tmp_path: Path, judge: ChatServer, judged: Callable[..., str], redis_url: str
) -> None:
    """The stopped call saved nothing: re-attached to by its task_id on another replica, it is
    taken over and graded there, once."""
    spec = tmp_path / "judged.yaml"
    spec.write_text(judged(judge.base_url, data=DATA, cache=False))
    with (
        _server(spec, tmp_path / "a.log", "--store", redis_url) as (a_url, a),
        _server(spec, tmp_path / "b.log", "--store", redis_url) as (b_url, _),
    ):
        reader, got = _open_call(a_url, judge)
        a.send_signal(signal.SIGTERM)
        assert a.wait(GRACE - 10) in (0, -signal.SIGTERM)
        reader.join(10)
        assert got["text"].endswith(SHUTDOWN_ERROR), got
        task_id = _task_id(got["text"])
        replay = httpx.post(b_url + "/judged/call", headers=H, json={**CALL, "task_id": task_id}, timeout=30)
        assert replay.text.startswith(f"event: task_id\r\ndata: {task_id}"), replay.text
        assert '"reward":1.0' in replay.text and '"attempt":1' in replay.text, replay.text
    assert len(judge.requests) == 2  # the stopped call's judge request, and the takeover's
    assert redis.Redis.from_url(redis_url).hgetall("eb:grades") == {b"correct": b"1"}
