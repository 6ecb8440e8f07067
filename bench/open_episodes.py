"""A hundred thousand open GRPO-shaped episodes on one host (issue 37, items 1 and 5).

One server (``envbuilder serve envs/gsm8k_tools.yaml envs/math500.yaml``, memory store or
Redis, ``--workers N``) holds ``--sessions`` episodes open at once:

* gsm8k_tools (three quarters): create -> calculator -> submit (wrong) -> submit (right) -> delete,
  the final reward expected 1.0;
* math500 (a quarter): create -> submit -> delete, the gold answer on even samples (1.0
  expected) and a wrong one on odd samples (0.0 expected), graded by the math check.

The load generator opens the episodes in waves (create, and gsm8k_tools' calculator call), so
every episode is open and holds state; then it advances them in random order (every step of a
random open episode, until all are deleted), always through ``--connections`` connections: a
session is a header, not a connection. The same generator runs ``--baseline`` episodes open at
once, repeated, for the throughput to compare with.

Measured: episodes/s over the whole run (open, advance, delete), call p50/p99 over every
request, server CPU per episode (the server's process tree; redis-server's apart), server RSS
and Redis ``used_memory`` after each wave (memory per 1,000 open sessions), errors, and every
episode's outcome: right reward, void (a 404, a null reward: never counted as 0) or wrong (a
reward that is not the expected one: the silent 0 the issue forbids). ``--profile S`` samples
the server for S seconds with py-spy while all sessions are open (the advance phase; ``py-spy``
on PATH, or its path in ``$PY_SPY``: ``pip install py-spy`` anywhere, it is one binary).

``--faults`` (Redis, ``--workers 2``): during the advance phase SIGKILL a worker (at 20 % and
70 % of the episodes finished) and restart redis-server once (at 45 %: ``SHUTDOWN SAVE``, then
the same data directory). The generator retries like the reference clients: a transport error
or a 503 repeats the request, a broken ``/call`` stream re-POSTs with its ``task_id``.

    python bench/open_episodes.py --store memory --sessions 100000 [--pin] [--probe FILE]
    python bench/open_episodes.py --store redis --workers 2 --sessions 100000 --faults
    python bench/open_episodes.py --store redis --sessions 2000 --commandstats   # Redis ops/episode
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import gc
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pyarrow.parquet as pq
import redis

from envbuilder.server._lifespan import GC_THRESHOLDS

ROOT = Path(__file__).resolve().parent.parent
ENVS = ROOT / "envs"
PATIENCE = 600.0
"""Seconds one request is retried (a worker restarting on a loaded machine is slow)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load() -> str:
    """The load average (1, 5, 15 min) of the machine, for every figure."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


# -- the servers ----------------------------------------------------------------------------------


class Redis:
    """A redis-server on a free port whose data directory survives a restart (``SHUTDOWN SAVE``)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="open-episodes-redis-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.dead_cpu = 0.0
        """CPU seconds of the redis-server processes a restart replaced."""

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        cmd += ["--appendonly", "no", "--dir", self.dir, "--maxmemory-policy", "noeviction"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError):
                if self.client().ping():
                    return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=60)

    def restart(self) -> float:
        """Save, stop and start again on the same data; the seconds it was down."""
        assert self.proc is not None
        t = time.monotonic()
        cpu = self.cpu()
        with contextlib.suppress(redis.RedisError):
            self.client().shutdown(save=True)
        self.proc.wait(120)
        self.dead_cpu += cpu
        self.start()
        return time.monotonic() - t

    def info(self) -> dict[str, Any]:
        return dict(self.client().info("all"))

    def process(self) -> psutil.Process:
        assert self.proc is not None
        return psutil.Process(self.proc.pid)

    def cpu(self) -> float:
        """CPU seconds of redis-server since it first started (across restarts)."""
        return self.dead_cpu + sum(self.process().cpu_times()[:2])

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Server:
    store: str
    workers: int
    session_timeout: float = 7200.0
    probe: str = ""
    """A file: run the server under ``server_probe.py``, which writes its own timings there."""
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    dead_cpu: float = 0.0
    """CPU seconds of the workers killed (lost from the tree; read just before each kill)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        exe = [str(Path(sys.executable).with_name("envbuilder"))]
        env = None
        if self.probe:
            exe = [sys.executable, str(ROOT / "bench" / "server_probe.py")]
            env = {**os.environ, "PROBE_OUT": self.probe}
        cmd = [*exe, "serve", str(ENVS / "gsm8k_tools.yaml"), str(ENVS / "math500.yaml")]
        cmd += ["--port", str(self.port), "--store", self.store, "--workers", str(self.workers)]
        cmd += ["--max-sessions", "1000000", "--max-sessions-per-client", "1000000"]
        cmd += ["--session-timeout", str(self.session_timeout)]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, cwd=ROOT, start_new_session=True, env=env
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                if r.status == 200 and len(self.workers_alive()) >= (self.workers if self.workers > 1 else 0):
                    time.sleep(1.0)
                    return
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited: {cmd}")
            time.sleep(0.2)
        raise RuntimeError("the server did not start")

    def tree(self) -> list[psutil.Process]:
        assert self.proc is not None
        me = psutil.Process(self.proc.pid)
        return [me, *me.children(recursive=True)]

    def workers_alive(self) -> list[psutil.Process]:
        out = []
        for p in self.tree()[1:]:
            with contextlib.suppress(psutil.Error):
                if p.status() != psutil.STATUS_ZOMBIE and "spawn_main" in " ".join(p.cmdline()):
                    out.append(p)
        return out

    def cpu(self) -> float:
        total = self.dead_cpu
        for p in self.tree():
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system
        return total

    def rss(self) -> int:
        total = 0
        for p in self.tree():
            with contextlib.suppress(psutil.Error):
                total += p.memory_info().rss
        return total

    def kill_worker(self) -> int:
        victim = self.workers_alive()[0]
        t = victim.cpu_times()
        self.dead_cpu += t.user + t.system
        os.kill(victim.pid, signal.SIGKILL)
        return victim.pid

    def stop(self) -> None:
        if self.proc is not None and self.probe:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGUSR1)  # the probe's figures of the whole run
                time.sleep(3)
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


# -- the episodes ---------------------------------------------------------------------------------


def gsm8k_gold() -> list[str]:
    path = ENVS / "data" / "gsm8k" / "train-00000-of-00001.parquet"
    answers = pq.read_table(path, columns=["answer"]).column("answer").to_pylist()
    return [a.split("####")[-1].strip().replace(",", "") for a in answers]


def math500_gold() -> list[str]:
    path = ENVS / "data" / "math500" / "test-00000-of-00001.parquet"
    return [str(a) for a in pq.read_table(path, columns=["answer"]).column("answer").to_pylist()]


@dataclass
class Episode:
    """One open episode: its steps left (each a request), and what its final reward must be."""

    sid: str
    env: str
    steps: collections.deque[tuple[str, Any]]
    expected: float
    target: str = ""
    """The gold answer (math500: what the grader compares with)."""
    reward: float | None = None
    outcome: str = ""


def make_episode(i: int, gsm: list[str], math: list[str]) -> Episode:
    sid = uuid.uuid4().hex
    if i % 4 != 3:  # gsm8k_tools, a GRPO group of 16 samples per prompt
        index = (i // 16) % len(gsm)
        gold = gsm[index]
        steps: list[tuple[str, Any]] = [
            ("create", {"env_name": "gsm8k-tools", "split": "train", "index": index}),
            ("call", {"name": "calculator", "input": {"expression": "6*7"}}),
            ("call", {"name": "submit", "input": {"answer": str(int(gold) + 1)}}),
            ("final", {"name": "submit", "input": {"answer": gold}}),
            ("delete", None),
        ]
        return Episode(sid, "gsm8k-tools", collections.deque(steps), 1.0)
    index = (i // 16) % len(math)
    right = (i // 4) % 2 == 0
    # The right samples of a group agree on the gold; every wrong one is its own number, so the
    # checker's remembered verdicts save only what a real group's agreeing samples would.
    answer = math[index] if right else str(-123456789 - i)
    steps = [
        ("create", {"env_name": "math500", "split": "test", "index": index}),
        ("final", {"name": "submit", "input": {"answer": answer}}),
        ("delete", None),
    ]
    return Episode(sid, "math500", collections.deque(steps), 1.0 if right else 0.0, math[index].strip())


def kind_of(ep: Episode, kind: str, body: Any) -> str:
    """The call kind a step is timed under (:data:`KINDS`)."""
    if kind in ("create", "delete"):
        return kind
    if ep.env == "math500":
        answer = body["input"]["answer"]
        if plain_decides(answer, ep.target):
            return "math:server"
        if (answer, ep.target) in _SENT:
            return "math:known"
        _SENT.add((answer, ep.target))
        return "math:checker"
    return "calculator" if body["name"] == "calculator" else "submit"


def kinds(tally: Tally, since: dict[str, int] | None = None) -> dict[str, dict[str, float]]:
    """p50/p99 (ms) and count of each call kind (from ``since``'s counts on, when given)."""
    out = {}
    for k, xs in tally.by_kind.items():
        window = sorted(xs[(since or {}).get(k, 0) :])
        if window:
            p50, p99 = pct(window, 0.5), pct(window, 0.99)
            out[k] = {
                "n": len(window),
                "p50_ms": round(p50, 1),
                "p99_ms": round(p99, 1),
                "p99/p50": round(p99 / p50, 2),
            }
    return out


def _task_id(text: str) -> str | None:
    """The ``task_id`` event's data once a stream's text holds all of it."""
    _, sep, rest = text.partition("event: task_id\r\ndata: ")
    data, end, _ = rest.partition("\r\n")
    return data if sep and end else None


class Void(Exception):
    """The episode cannot finish: its session is gone, or the server says so."""


KINDS = ("create", "calculator", "submit", "math:server", "math:checker", "math:known", "delete")
"""Call kinds, timed apart: a math answer that needs SymPy (a fresh checker process) and a
calculator call are two distributions, and one p99 over both says only how many checks the mix
holds. ``math:server``: an answer the grader decides without SymPy in the server (the same text,
plain numbers: its own ``_plain``); ``math:checker``: the first time an answer goes to a checker
process; ``math:known``: an answer sent before for the same task (its verdict remembered, or its
check in flight)."""
_SENT: set[tuple[str, str]] = set()
"""(answer, target) pairs of math answers sent so far in this run of the script."""


def plain_decides(answer: str, target: str) -> bool:
    """Whether the math grader decides ``answer`` without a checker process (its own test)."""
    from envbuilder.graders._math import _checker

    return _checker("latex_and_expr", 6)._plain(answer, target) is not None


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    by_kind: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    retries: int = 0
    reattached: int = 0
    errors: list[str] = field(default_factory=list)
    """Samples of what went wrong: requests that failed, void episodes' errors, wrong rewards."""
    failed: int = 0
    """Episodes ended by a request that failed (neither a grade nor a void one): the errors."""
    right: int = 0
    void: int = 0
    wrong: int = 0
    done: int = 0
    client_lag: list[float] = field(default_factory=list)
    """How late the load generator's own event loop wakes a task that asks every 5 ms: the
    generator's queueing, which the client's call times include and the server's do not."""


def lag_ms(xs: list[float]) -> dict[str, float]:
    s = sorted(xs) or [0.0]
    return {"p50": 1000 * s[len(s) // 2], "p99": pct(s, 0.99), "max": 1000 * s[-1]}


class Generator:
    """Bounded connections, episodes advanced one request at a time in random order."""

    def __init__(self, url: str, connections: int, tally: Tally) -> None:
        self.url = url
        self.connections = connections
        self.tally = tally
        self.http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Generator:
        connector = aiohttp.TCPConnector(limit=self.connections, limit_per_host=self.connections)
        self.http = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=PATIENCE))
        self.lagging = asyncio.create_task(self._lag())
        return self

    async def _lag(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(0.005)
            self.tally.client_lag.append(max(0.0, loop.time() - t - 0.005))

    async def __aexit__(self, *exc: object) -> None:
        assert self.http is not None
        self.lagging.cancel()
        await self.http.close()

    async def _post(self, path: str, sid: str, body: Any, label: str) -> tuple[int, str]:
        assert self.http is not None
        headers = {"X-Session-ID": sid, "X-Bench-Kind": label}
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            try:
                async with self.http.post(self.url + path, json=body, headers=headers) as r:
                    text = await r.text()
                    if r.status == 503:
                        self.tally.retries += 1
                        await asyncio.sleep(float(r.headers.get("Retry-After", "0.2")))
                        continue
                    return r.status, text
            except (TimeoutError, aiohttp.ClientError):
                self.tally.retries += 1
                await asyncio.sleep(0.1)
        raise Void(f"{path}: no answer in {PATIENCE:g} s")

    async def _call(self, env: str, sid: str, body: dict[str, Any], label: str) -> dict[str, Any]:
        assert self.http is not None
        headers = {"X-Session-ID": sid, "X-Bench-Kind": label}
        task_id = None
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            payload = body if task_id is None else {**body, "task_id": task_id}
            try:
                async with self.http.post(f"{self.url}/{env}/call", json=payload, headers=headers) as r:
                    status, retry_after = r.status, float(r.headers.get("Retry-After", "0.2"))
                    # Read as it comes: the task_id, once named, re-attaches a stream that breaks
                    # (a killed worker) instead of sending the call again, as the clients do.
                    raw = b""
                    async for chunk in r.content.iter_any():
                        raw += chunk
                        if task_id is None and status == 200:
                            task_id = _task_id(raw.decode("latin-1"))
                    text = raw.decode()
            except (TimeoutError, aiohttp.ClientError):
                self.tally.retries += 1
                self.tally.reattached += task_id is not None
                await asyncio.sleep(0.1)
                continue
            if status == 503:
                self.tally.retries += 1
                await asyncio.sleep(retry_after)
                continue
            if status == 404:
                raise Void(f"/call 404: {text[:120]}")
            if status != 200:
                raise RuntimeError(f"/call {status}: {text[:200]}")
            for block in text.split("\r\n\r\n"):
                if not block.startswith("event:"):
                    continue
                name, _, data = block.partition("\r\n")
                name, data = name[len("event: ") :], data[len("data: ") :]
                if name == "task_id":
                    task_id = data
                elif name == "end":
                    result: dict[str, Any] = json.loads(data)
                    if not result.get("ok"):
                        raise RuntimeError(f"tool refused: {data[:200]}")
                    return dict(result["output"])
                elif name == "error":
                    raise Void(f"/call error event: {data[:200]}")
            self.tally.retries += 1  # the stream broke before its end: re-attach by task_id
            self.tally.reattached += task_id is not None
        raise Void(f"/call: no result in {PATIENCE:g} s")

    async def step(self, ep: Episode) -> None:
        """Run the episode's next step (the whole episode is void after a 404)."""
        kind, body = ep.steps.popleft()
        label = kind_of(ep, kind, body)
        t = time.perf_counter()
        try:
            if kind == "create":
                status, text = await self._post("/create", ep.sid, body, label)
                if status != 200:
                    raise RuntimeError(f"/create {status}: {text[:200]}")
            elif kind == "delete":
                status, text = await self._post("/delete", ep.sid, None, label)
                if status not in (200, 404):
                    raise RuntimeError(f"/delete {status}: {text[:200]}")
            else:
                out = await self._call(ep.env, ep.sid, body, label)
                if kind == "final":
                    ep.reward = out.get("reward")
        except Void as exc:
            ep.outcome = "void"
            ep.steps.clear()
            self.tally.errors.append(str(exc)[:200])
        except Exception as exc:  # counted: an error is what the targets forbid
            ep.outcome = "error"
            ep.steps.clear()
            self.tally.failed += 1
            self.tally.errors.append(f"{type(exc).__name__}: {exc}"[:200])
        finally:
            took = time.perf_counter() - t
            self.tally.latencies.append(took)
            self.tally.by_kind[label].append(took)
        if not ep.steps:
            self.finish(ep)

    def finish(self, ep: Episode) -> None:
        t = self.tally
        t.done += 1
        if ep.outcome == "":
            if ep.reward is None:
                t.void += 1  # a void grade: null, never 0
                ep.outcome = "void"
            elif ep.reward == ep.expected:
                t.right += 1
                ep.outcome = "right"
            else:
                t.wrong += 1
                ep.outcome = "wrong"
                t.errors.append(f"{ep.env} reward {ep.reward} where {ep.expected} was due")
        elif ep.outcome == "void":
            t.void += 1

    async def drive(
        self, episodes: list[Episode], steps_each: int | None, more: Iterator[Episode] | None = None
    ) -> None:
        """Advance ``episodes`` in random order over the connections: ``steps_each`` steps of
        each (None: to the end). ``more``: each episode that ends is replaced by the next of
        these (as many open at once the whole time, not a batch that drains to its slowest)."""
        left = {id(ep): steps_each for ep in episodes}
        ready = list(episodes)
        rng = random.Random(len(episodes))

        async def lane() -> None:
            while ready:
                i = rng.randrange(len(ready))
                ready[i], ready[-1] = ready[-1], ready[i]
                ep = ready.pop()
                await self.step(ep)
                n = left[id(ep)]
                if n is not None:
                    left[id(ep)] = n = n - 1
                if ep.steps and (n is None or n > 0):
                    ready.append(ep)
                elif not ep.steps and more is not None:
                    nxt = next(more, None)
                    if nxt is not None:
                        left[id(nxt)] = steps_each
                        ready.append(nxt)

        await asyncio.gather(*(lane() for _ in range(self.connections)))


# -- a run ----------------------------------------------------------------------------------------


def pct(xs: list[float], q: float) -> float:
    return 1000 * xs[min(len(xs) - 1, int(len(xs) * q))]


async def run_open(
    server: Server,
    store: Redis | None,
    sessions: int,
    wave: int,
    connections: int,
    gold: tuple[list[str], list[str]],
    faults: bool,
    profile: float,
    offset: int,
    fault_plan: str = "0.2:kill,0.45:redis,0.7:kill",
) -> dict[str, Any]:
    """Open ``sessions`` episodes in waves, then advance them all in random order."""
    tally = Tally()
    episodes = [make_episode(offset + i, *gold) for i in range(sessions)]
    # The generator's own full collections would scan every episode it holds (100,000 of them)
    # with its loop stopped, a stall its call times would count: what it built is kept out of
    # the scans, and its collector waits as the server's does (server/_lifespan.py).
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    redis_client = store.client() if store else None
    used0 = int(redis_client.info("memory")["used_memory"]) if redis_client else 0
    redis_rss0 = store.process().memory_info().rss if store else 0
    redis_cpu0 = store.cpu() if store else 0.0
    rss0, cpu0 = server.rss(), server.cpu()
    waves = []
    t0 = time.perf_counter()
    async with Generator(server.url, connections, tally) as gen:
        for start in range(0, sessions, wave):
            chunk = episodes[start : start + wave]
            # Open: create, and a gsm8k_tools episode's calculator call (state held), in random order.
            await gen.drive(chunk, 1)
            await gen.drive([ep for ep in chunk if ep.env == "gsm8k-tools" and ep.steps], 1)
            row = {
                "open": start + len(chunk),
                "server_rss_mb": server.rss() / 2**20,
                "load": load(),
                "s": time.perf_counter() - t0,
            }
            if redis_client:
                row["redis_used_mb"] = int(redis_client.info("memory")["used_memory"]) / 2**20
                row["redis_rss_mb"] = store.process().memory_info().rss / 2**20 if store else 0
            waves.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        t_open = time.perf_counter() - t0
        rss_open = server.rss()
        used_open = int(redis_client.info("memory")["used_memory"]) if redis_client else 0
        redis_rss_open = store.process().memory_info().rss if store else 0
        keys_open = int(redis_client.dbsize()) if redis_client else 0

        events: list[str] = []

        async def chaos() -> None:
            assert store is not None
            plan = [(float(at), what) for at, what in (p.split(":") for p in fault_plan.split(","))]
            for at, what in plan:
                while tally.done < at * sessions:
                    await asyncio.sleep(0.1)
                if what == "kill":
                    pid = server.kill_worker()
                    events.append(f"worker {pid} SIGKILLed at {tally.done:,} episodes done")
                else:
                    down = await asyncio.to_thread(store.restart)
                    events.append(
                        f"redis-server restarted at {tally.done:,} episodes done ({down:.1f} s down)"
                    )
                print(events[-1], file=sys.stderr, flush=True)

        async def sample() -> str:
            out = Path(tempfile.mkdtemp(prefix="open-episodes-prof-")) / "stacks.txt"
            pids = [p.pid for p in server.workers_alive()] or [server.tree()[0].pid]
            cmd = [os.environ.get("PY_SPY", "py-spy"), "record", "-p", str(pids[0])]
            cmd += ["-d", str(int(profile)), "-r", "50", "-f", "raw", "-o", str(out), "--nonblocking"]
            p = await asyncio.create_subprocess_exec(
                *cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            await p.wait()
            print(json.dumps({"profile": summarise(str(out))}), file=sys.stderr, flush=True)
            return str(out)

        async def progress() -> None:
            seen, t_last = len(tally.latencies), time.perf_counter()
            lag_seen = len(tally.client_lag)
            seen_kind = {k: len(v) for k, v in tally.by_kind.items()}
            while True:
                await asyncio.sleep(60)
                now, window = time.perf_counter(), sorted(tally.latencies[seen:])
                row = {
                    "requests_per_s": round(len(window) / (now - t_last), 1),
                    "p50_ms": round(pct(window, 0.5)) if window else None,
                    "p99_ms": round(pct(window, 0.99)) if window else None,
                    "kinds": kinds(tally, seen_kind),
                    "client_loop_lag_ms": lag_ms(tally.client_lag[lag_seen:]),
                    "server_rss_mb": round(server.rss() / 2**20),
                    "done": tally.done,
                    "right": tally.right,
                    "void": tally.void,
                    "wrong": tally.wrong,
                    "errors": tally.failed,
                    "retries": tally.retries,
                    "s": round(time.perf_counter() - t0),
                    "load": load(),
                }
                print(json.dumps(row), file=sys.stderr, flush=True)
                seen, t_last = seen + len(window), now
                lag_seen = len(tally.client_lag)
                seen_kind = {k: len(v) for k, v in tally.by_kind.items()}

        t_adv = time.perf_counter()
        adv_seen, adv_kind = len(tally.latencies), {k: len(v) for k, v in tally.by_kind.items()}
        side = []
        if faults and store is not None:
            side.append(asyncio.create_task(chaos()))
        prof = asyncio.create_task(sample()) if profile else None
        ticker = asyncio.create_task(progress())
        await gen.drive([ep for ep in episodes if ep.steps], None)
        t_end = time.perf_counter()
        ticker.cancel()
        for task in side:
            await task
        stacks = await prof if prof else None
    wall = t_end - t0
    cpu = server.cpu() - cpu0
    lat = sorted(tally.latencies)
    result: dict[str, Any] = {
        "store": "redis" if store else "memory",
        "workers": server.workers,
        "sessions": sessions,
        "connections": connections,
        "episodes_per_s": sessions / wall,
        "open_s": t_open,
        "advance_s": t_end - t_adv,
        "requests": len(lat),
        "call_p50_ms": pct(lat, 0.5),
        "call_p99_ms": pct(lat, 0.99),
        "kinds": kinds(tally),
        "advance_kinds": kinds(tally, adv_kind),
        "advance_requests_per_s": (len(lat) - adv_seen) / (t_end - t_adv),
        "server_cpu_ms_per_episode": 1000 * cpu / sessions,
        "server_kb_per_open_session": (rss_open - rss0) / 1024 / sessions,
        "right": tally.right,
        "void": tally.void,
        "wrong": tally.wrong,
        "errors": tally.failed,
        "lost": sessions - tally.done,
        "error_samples": tally.errors[:5],
        "retries": tally.retries,
        "reattached": tally.reattached,
        "client_loop_lag_ms": lag_ms(tally.client_lag),
        "events": events,
        "waves": waves,
        "load_end": load(),
    }
    if store and redis_client:
        redis_client = store.client()  # (a fresh connection after a restart)
        result["redis_kb_per_open_session"] = (used_open - used0) / 1024 / sessions
        result["redis_rss_kb_per_open_session"] = (redis_rss_open - redis_rss0) / 1024 / sessions
        result["redis_keys_open"] = keys_open
        result["redis_cpu_ms_per_episode"] = 1000 * (store.cpu() - redis_cpu0) / sessions
        result["grades"] = {k.decode(): int(v) for k, v in redis_client.hgetall("eb:grades").items()}
    if stacks:
        result["profile"] = summarise(stacks)
    return result


async def run_baseline(
    server: Server,
    size: int,
    episodes: int,
    connections: int,
    gold: tuple[list[str], list[str]],
    offset: int = 0,
) -> dict[str, Any]:
    """``size`` episodes open at once, run to their end, again and again: ``episodes`` in all."""
    tally = Tally()
    cpu0 = server.cpu()
    load0 = load()
    t0 = time.perf_counter()
    async with Generator(server.url, connections, tally) as gen:
        stream = (make_episode(offset + i, *gold) for i in range(episodes))
        await gen.drive([ep for _, ep in zip(range(size), stream, strict=False)], None, stream)
    wall = time.perf_counter() - t0
    lat = sorted(tally.latencies)
    return {
        "store": server.store.split(":")[0],
        "workers": server.workers,
        "sessions": size,
        "connections": connections,
        "episodes": episodes,
        "episodes_per_s": episodes / wall,
        "requests_per_s": len(lat) / wall,
        "call_p50_ms": pct(lat, 0.5),
        "call_p99_ms": pct(lat, 0.99),
        "kinds": kinds(tally),
        "server_cpu_ms_per_episode": 1000 * (server.cpu() - cpu0) / episodes,
        "right": tally.right,
        "void": tally.void,
        "wrong": tally.wrong,
        "errors": tally.failed,
        "error_samples": tally.errors[:5],
        "client_loop_lag_ms": lag_ms(tally.client_lag),
        "load_start": load0,
        "load_end": load(),
    }


def summarise(path: str, top: int = 25) -> dict[str, Any]:
    """py-spy's raw stacks: the share of samples in each function (inclusive) and at the top."""
    inclusive: collections.Counter[str] = collections.Counter()
    leaf: collections.Counter[str] = collections.Counter()
    total = 0
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        frames = [
            f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].split("/")[-1] + ")"
            for f in stack.split(";")
        ]
        for f in set(frames):
            inclusive[f] += n
        leaf[frames[-1]] += n
    return {
        "samples": total,
        "inclusive": [(f, round(100 * n / total, 1)) for f, n in inclusive.most_common(top)],
        "self": [(f, round(100 * n / total, 1)) for f, n in leaf.most_common(top)],
    }


async def _play(url: str, tally: Tally, episodes: list[Episode]) -> None:
    async with Generator(url, 8, tally) as gen:
        await gen.drive(episodes, None)


def round_trips(store: Redis, url: str, episodes: list[Episode]) -> float:
    """Commands the server sends per episode (MONITOR: a script's own commands, marked
    ``lua``, are not round trips)."""
    lines: list[bytes] = []
    sock = socket.create_connection(("127.0.0.1", store.port))
    sock.sendall(b"MONITOR\r\n")
    sock.settimeout(2)

    def read() -> None:
        buf = b""
        while True:
            try:
                data = sock.recv(1 << 16)
            except OSError:
                break
            if not data:
                break
            buf += data
            *done, buf = buf.split(b"\r\n")
            lines.extend(done)

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.2)
    asyncio.run(_play(url, Tally(), episodes))
    time.sleep(2.5)  # the reader stops at its timeout
    sock.close()
    reader.join()
    sent = [x for x in lines if x.startswith(b"+") and b"lua]" not in x and b'"ping"' not in x.lower()]
    sent = [x for x in sent if b'"SET" "eb:health:' not in x and x != b"+OK"]
    return len(sent) / len(episodes)


def commandstats(
    store: Redis, server: Server, episodes: int, gold: tuple[list[str], list[str]]
) -> dict[str, Any]:
    """Redis commands, bytes and round trips per episode of each kind (INFO commandstats)."""
    out: dict[str, Any] = {}
    for env, offset in (("gsm8k-tools", 0), ("math500", 3)):
        c = store.client()
        c.config_resetstat()
        before = c.info("stats")
        redis_cpu = sum(store.process().cpu_times()[:2])
        tally = Tally()
        eps = [make_episode(offset + 4 * i, *gold) for i in range(episodes)]
        assert all(ep.env == env for ep in eps)
        asyncio.run(_play(server.url, tally, eps))
        redis_cpu = sum(store.process().cpu_times()[:2]) - redis_cpu
        stats = c.info("commandstats")
        after = c.info("stats")
        trips = round_trips(store, server.url, [make_episode(offset + 4 * i, *gold) for i in range(20)])
        calls = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
        calls.pop("info", None)
        calls.pop("config|resetstat", None)
        calls.pop("config", None)
        top = {k: round(v / episodes, 2) for k, v in sorted(calls.items()) if k not in ("info",)}
        scripts = sum(v for k, v in calls.items() if k in ("evalsha", "eval"))
        # Round trips: the commands the server sent (a script is one; the commands it runs are not).
        inner = sum(v for k, v in calls.items() if k not in ("evalsha", "eval", "script|load", "script"))
        sent = int(after["total_commands_processed"]) - int(before["total_commands_processed"])
        out[env] = {
            "episodes": episodes,
            "right": tally.right,
            "errors": tally.failed,
            "commands_per_episode": top,
            "round_trips_per_episode": trips,
            "redis_usec_per_episode": sum(
                int(v["usec"]) for k, v in stats.items() if k.removeprefix("cmdstat_") in ("evalsha", "eval")
            )
            / episodes,
            "redis_server_cpu_us_per_episode": 1e6 * redis_cpu / episodes,
            "scripts_per_episode": scripts / episodes,
            "commands_processed_per_episode": sent / episodes,
            "commands_incl_script_calls_per_episode": (inner + scripts) / episodes,
            "bytes_in_per_episode": (
                int(after["total_net_input_bytes"]) - int(before["total_net_input_bytes"])
            )
            / episodes,
            "bytes_out_per_episode": (
                int(after["total_net_output_bytes"]) - int(before["total_net_output_bytes"])
            )
            / episodes,
        }
    return out


class Pinning:
    """``--pin`` (one worker, two or more cores): the server's event-loop thread on core 0 and
    this generator on core 1, so the two do not queue for the same core; every other process
    of the server (the checkers' zygotes and the children they fork, at their niceness 10) may
    run on any core and is put back there each second, since a zygote started by the pinned
    thread would inherit its one core."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.all = os.sched_getaffinity(0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        assert self.server.proc is not None and self.server.workers == 1, "--pin needs one worker"
        os.sched_setaffinity(self.server.proc.pid, {0})  # its main thread: the event loop
        os.sched_setaffinity(0, {1})  # this thread (the generator's loop) and the threads it starts
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            for p in self.server.tree()[1:]:
                with contextlib.suppress(psutil.Error, OSError):
                    if set(p.cpu_affinity()) != self.all:
                        p.cpu_affinity(sorted(self.all))

    def stop(self) -> None:
        self._stop.set()
        os.sched_setaffinity(0, self.all)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", choices=["memory", "redis"], default="memory")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--sessions", type=int, default=100_000, help="episodes open at once")
    ap.add_argument("--wave", type=int, default=10_000, help="episodes opened per wave")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument(
        "--baseline", type=int, default=64, help="episodes open at once in the baseline (0: none)"
    )
    ap.add_argument("--baseline-episodes", type=int, default=4096)
    ap.add_argument("--faults", action="store_true", help="kill a worker twice and restart Redis once")
    ap.add_argument(
        "--fault-plan",
        default="0.2:kill,0.45:redis,0.7:kill",
        help="with --faults: at which share of the episodes done to kill a worker or restart Redis",
    )
    ap.add_argument("--profile", type=float, default=0, help="seconds of py-spy samples at full load")
    ap.add_argument("--commandstats", action="store_true", help="only count Redis commands per episode")
    ap.add_argument(
        "--session-timeout",
        type=float,
        default=7200.0,
        help="the server's; above the run's length (opening 100,000 on a loaded machine outlasts 900 s)",
    )
    ap.add_argument(
        "--probe",
        type=Path,
        help="one worker: run the server under server_probe.py (its time per call kind, event-loop "
        "lag, GC pauses) and write its figures to this file (JSON lines, one a minute)",
    )
    ap.add_argument(
        "--pin",
        action="store_true",
        help="one worker: the server's event loop on core 0, this generator on core 1 (the checkers "
        "on any core), so the tail measured is the server's, not the two sharing a core",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.probe:
        args.probe.unlink(missing_ok=True)
    gold = (gsm8k_gold(), math500_gold())
    store = Redis() if args.store == "redis" else None
    if store:
        store.start()
    server = Server(
        store.url if store else "memory", args.workers, args.session_timeout, str(args.probe or "")
    )
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_start": load(),
    }
    pinning = Pinning(server) if args.pin else None
    results["pinned"] = bool(pinning)
    try:
        server.start()
        if pinning:
            pinning.start()
        if args.commandstats:
            assert store is not None
            asyncio.run(run_baseline(server, 16, 64, 16, gold))  # warm-up
            results["commandstats"] = commandstats(store, server, args.sessions, gold)
        else:
            asyncio.run(run_baseline(server, 64, 640, args.connections, gold, 5 * 10**6))  # warm-up
            if args.baseline:
                results["baseline"] = asyncio.run(
                    run_baseline(
                        server, args.baseline, args.baseline_episodes, args.connections, gold, 2 * 10**6
                    )
                )
                print(json.dumps(results["baseline"]), file=sys.stderr, flush=True)
            results["open"] = asyncio.run(
                run_open(
                    server,
                    store,
                    args.sessions,
                    args.wave,
                    args.connections,
                    gold,
                    args.faults,
                    args.profile,
                    10**6,
                    args.fault_plan,
                )
            )
            if args.baseline:
                # The same generator and connections again, after: the machine's load drifts, so
                # the ratio is to the mean of the baselines either side of the run.
                results["baseline_after"] = asyncio.run(
                    run_baseline(
                        server, args.baseline, args.baseline_episodes, args.connections, gold, 3 * 10**6
                    )
                )
                print(json.dumps(results["baseline_after"]), file=sys.stderr, flush=True)
                either = [results[k]["episodes_per_s"] for k in ("baseline", "baseline_after")]
                results["ratio_throughput"] = results["open"]["episodes_per_s"] / (sum(either) / 2)
                results["ratio_throughput_range"] = [
                    results["open"]["episodes_per_s"] / max(either),
                    results["open"]["episodes_per_s"] / min(either),
                ]
            results["open"]["p99_over_p50"] = results["open"]["call_p99_ms"] / results["open"]["call_p50_ms"]
    finally:
        if pinning:
            pinning.stop()
        server.stop()
        if store:
            store.stop()
    if args.probe and args.probe.exists():
        lines = [json.loads(x) for x in args.probe.read_text().splitlines()]
        results["server_probe"] = [x for x in lines if x["whole"]]
    text = json.dumps(results, indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
