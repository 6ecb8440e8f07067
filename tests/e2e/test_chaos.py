"""Chaos: episodes run against ``serve --workers 2`` on one real Redis while a worker is killed
with SIGKILL again and again. No episode fails, no session is ever unknown (404), and every
answer is graded exactly once (the grade counts in Redis equal the episodes).

The client retries like the reference clients: a transport error or a 503 repeats the request,
a broken ``/call`` stream re-POSTs with the ``task_id`` it saw. The issue's full run (64
concurrent episodes for two minutes, a kill every 10 s) is
``CHAOS_SECONDS=120 CHAOS_CONCURRENCY=64 CHAOS_KILL_EVERY=10 pytest tests/e2e/test_chaos.py``.

Nothing here depends on how fast a loaded machine runs: the run lasts until ``CHAOS_KILLS``
workers were killed (each once its predecessor's replacement is up) and at least
``CHAOS_SECONDS`` passed; a client retries for as long as :data:`PATIENCE`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from dataclasses import dataclass, field

import httpx
import psutil
import redis

from envbuilder.environment import Environment
from tests.conftest import ENVS
from tests.processes import serve_process

SECONDS = float(os.environ.get("CHAOS_SECONDS", "8"))
CONCURRENCY = int(os.environ.get("CHAOS_CONCURRENCY", "32"))
KILL_EVERY = float(os.environ.get("CHAOS_KILL_EVERY", "2.5"))
KILLS = int(os.environ.get("CHAOS_KILLS", "3"))
PATIENCE = 300.0
"""Seconds a client keeps retrying one request (a restarted worker on a loaded machine is slow)."""


@dataclass
class Tally:
    episodes: int = 0
    correct_expected: int = 0
    failures: list[str] = field(default_factory=list)
    not_found: int = 0
    retries: int = 0
    reattached: int = 0


class Gone(Exception):
    pass


async def _request(
    client: httpx.AsyncClient, tally: Tally, method: str, path: str, sid: str, body: dict | None = None
) -> httpx.Response:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        try:
            r = await client.request(method, path, headers={"X-Session-ID": sid}, json=body)
        except httpx.TransportError:
            tally.retries += 1
            await asyncio.sleep(0.05)
            continue
        if r.status_code == 503:
            tally.retries += 1
            await asyncio.sleep(float(r.headers.get("retry-after", "0.1")))
            continue
        if r.status_code == 404:
            tally.not_found += 1
        return r
    raise Gone(f"{method} {path}: no answer in {PATIENCE:g} s")


async def _call(client: httpx.AsyncClient, tally: Tally, sid: str, body: dict) -> dict:
    task_id = None
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        payload = body if task_id is None else {**body, "task_id": task_id}
        buf = ""
        try:
            async with client.stream("POST", "/gsm8k/call", headers={"X-Session-ID": sid}, json=payload) as r:
                if r.status_code != 200:
                    await r.aread()
                    if r.status_code == 404:
                        tally.not_found += 1
                    if r.status_code != 503:
                        raise Gone(f"/call answered {r.status_code}: {r.text}")
                else:
                    async for text in r.aiter_text():
                        buf += text
                        while "\r\n\r\n" in buf:
                            block, buf = buf.split("\r\n\r\n", 1)
                            if not block.startswith("event:"):
                                continue  # a keep-alive comment
                            name, data = block.split("\r\n", 1)
                            name, data = name[len("event: ") :], data[len("data: ") :]
                            if name == "task_id":
                                task_id = data
                            elif name == "end":
                                return json.loads(data)
                            elif name == "error":
                                raise Gone(f"/call error event: {data}")
        except httpx.TransportError:
            pass
        tally.retries += 1
        if task_id is not None:
            tally.reattached += 1
        await asyncio.sleep(0.05)
    raise Gone(f"/call: no result in {PATIENCE:g} s")


async def _episodes(url: str, gsm8k: Environment, tally: Tally, stop: asyncio.Event) -> None:
    split = gsm8k.split("train")

    async def one_loop(worker: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=PATIENCE) as client:
            i = worker
            while not stop.is_set():
                i += CONCURRENCY
                index = i % len(split)
                sid = str(uuid.uuid4())
                correct = i % 2 == 0
                answer = split.task(index)["answer"].split("####")[-1].strip() if correct else "-1"
                try:
                    r = await _request(
                        client, tally, "POST", "/create", sid, {"split": "train", "index": index}
                    )
                    if r.status_code != 200:
                        raise Gone(f"/create answered {r.status_code}: {r.text}")
                    r = await _request(client, tally, "GET", "/gsm8k/prompt", sid)
                    if r.status_code != 200:
                        raise Gone(f"/prompt answered {r.status_code}: {r.text}")
                    out = await _call(client, tally, sid, {"name": "submit", "input": {"answer": answer}})
                    if out.get("output", {}).get("reward") != (1.0 if correct else 0.0):
                        raise Gone(f"unexpected result {out}")
                    await _request(client, tally, "POST", "/delete", sid)
                except Gone as exc:
                    tally.failures.append(str(exc))
                    continue
                tally.episodes += 1
                tally.correct_expected += correct

    await asyncio.gather(*(one_loop(w) for w in range(CONCURRENCY)))


def _workers(pid: int) -> list[psutil.Process]:
    """The live worker processes (a killed one stays a zombie until the supervisor reaps it)."""
    out = []
    for p in psutil.Process(pid).children():
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "spawn_main" in " ".join(p.cmdline()):
                out.append(p)
        except psutil.Error:
            continue
    return out


async def _until_workers(pid: int, count: int) -> None:
    """Until ``count`` workers live (the supervisor replaced the last one killed)."""
    deadline = time.monotonic() + PATIENCE
    while len(_workers(pid)) < count:
        assert time.monotonic() < deadline, f"fewer than {count} workers after {PATIENCE:g} s"
        await asyncio.sleep(0.1)


async def _killer(pid: int, until: float, killed: list[int], stop: asyncio.Event) -> None:
    """Kill a worker every ``KILL_EVERY`` s, each once the last one's replacement lives, until
    ``KILLS`` are dead and ``until`` has passed; then let the replacement come up and stop."""
    try:
        while len(killed) < KILLS or time.monotonic() + KILL_EVERY < until:
            await asyncio.sleep(KILL_EVERY)
            await _until_workers(pid, 2)
            workers = _workers(pid)
            victim = workers[len(killed) % len(workers)]
            os.kill(victim.pid, signal.SIGKILL)
            killed.append(victim.pid)
        await _until_workers(pid, 2)
    finally:
        stop.set()


def test_killed_workers_lose_no_episode(redis_url: str, gsm8k: Environment) -> None:
    with serve_process(str(ENVS / "gsm8k.yaml"), "--store", redis_url, "--workers", "2") as (url, proc):
        tally = Tally()
        killed: list[int] = []

        async def run() -> None:
            await _until_workers(proc.pid, 2)
            stop = asyncio.Event()
            until = time.monotonic() + SECONDS
            await asyncio.gather(_episodes(url, gsm8k, tally, stop), _killer(proc.pid, until, killed, stop))

        asyncio.run(run())
    print(
        f"chaos: {tally.episodes} episodes, {len(killed)} workers killed, {tally.retries} retries, "
        f"{tally.reattached} re-attached calls"
    )
    assert len(killed) >= KILLS
    assert tally.failures == []
    assert tally.not_found == 0
    assert tally.episodes > 0
    grades = {k.decode(): int(v) for k, v in redis.Redis.from_url(redis_url).hgetall("eb:grades").items()}
    assert grades == {"correct": tally.correct_expected, "incorrect": tally.episodes - tally.correct_expected}
