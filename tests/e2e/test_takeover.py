"""A replica killed (SIGKILL) while it grades: the client re-attaches to the call by its
``task_id`` on another replica, which takes the call over once the dead one's lease lapses,
runs it again on the session as last saved, and the answer is counted once."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import redis

from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, completion
from tests.processes import serve_process


def judge(body: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    if i == 0:
        time.sleep(3)  # the first replica is killed while it waits for this
    return 200, completion("Matches.\nVERDICT: CORRECT"), {}


def test_a_call_of_a_killed_replica_is_taken_over(
    tmp_path: Path, redis_url: str, judged: Callable[..., str]
) -> None:
    data = ENVS / "data" / "gsm8k" / "test-00000-of-00001.parquet"
    with ChatServer(judge) as chat, contextlib.ExitStack() as stack:
        spec = tmp_path / "judged.yaml"
        spec.write_text(judged(chat.base_url, data=data))
        # The spec reads data outside its folder: a served spec needs the operator's --data-root.
        allow = ("--data-root", str(data.parent))
        a_url, a = stack.enter_context(serve_process(str(spec), "--store", redis_url, *allow))
        b_url, _ = stack.enter_context(serve_process(str(spec), "--store", redis_url, *allow))
        h = {"X-Session-ID": "s"}
        assert httpx.post(a_url + "/create", headers=h, json={"split": "test", "index": 0}).status_code == 200
        call = {"name": "submit", "input": {"answer": "18"}}
        with httpx.stream("POST", a_url + "/judged/call", headers=h, json=call, timeout=10) as r:
            first = next(r.iter_text())
            assert first.startswith("event: task_id")
            task_id = first.split("data: ")[1].split("\r\n")[0]
            while not chat.requests:  # the judge is being asked
                time.sleep(0.05)
            os.killpg(a.pid, signal.SIGKILL)
        started = time.monotonic()
        with httpx.Client(base_url=b_url, timeout=30) as b:
            replay = b.post("/judged/call", headers=h, json={**call, "task_id": task_id})
            took = time.monotonic() - started
            assert replay.text.startswith(f"event: task_id\r\ndata: {task_id}")
            assert '"reward":1.0' in replay.text and '"attempt":1' in replay.text
            assert took < 10
            again = b.post("/judged/call", headers=h, json={**call, "task_id": task_id})
            assert again.text == replay.text  # replayed, not run again
        assert len(chat.requests) == 2  # the killed replica's judge call, and the takeover's
    grades = redis.Redis.from_url(redis_url).hgetall("eb:grades")
    assert grades == {b"correct": b"1"}
