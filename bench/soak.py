"""Soak: honest episodes at a fixed concurrency against `envbuilder serve`, mixed with hostile
requests, for a fixed time; reports episodes, errors, and the server's RSS and descriptors.

    python bench/soak.py --seconds 600 --concurrency 64

Honest clients run create -> prompt -> submit -> delete and count every unexpected answer as an
error. Hostile clients, alongside, send: 2 MB bodies (413), 32 KB headers (431), half-sent
requests left open (closed by the read timeout), malformed JSON and bad session ids (4xx),
oversized task_range pages (400), requests without the API key (401), and a runaway template
(cut off by its deadline while everyone else keeps going). The second round's kinds (issue 22):
a math answer that freezes SymPy (``9^{9^{9^{9}}}``, killed in its grading process), answers
that starve the grading processes (``(1+x)^{3000}``), a loop-free template that is slow on a
long client task, forged tasks (a served task with its gold changed: graded against the served
row), and session hoarding (one key opening sessions until its share is refused with 429).
The third round's (issue 31), on reasoning-gym checkers that evaluate answers: reply forgery (an
answer that SymPy runs writes a reply of its own, pickled and as JSON, claiming full marks:
ungradeable) and worker poisoning (an answer that replaces every family's checker); alongside,
honest clients submit reasoning_mix's gold answers, and any grade but 1.0 is an honest error.
Also (issue 31): cross-session access (another key probing live honest sessions
by their ids: each probe must get what an unknown session gets, and the honest episode goes on),
and connection hoarding from several addresses (127.0.0.2-5 each opening their share of
connections that never finish their headers, held a few seconds: honest clients from 127.0.0.1
keep their place, and what the server lets go reads a 503 or 408). Honest clients use their own
key, so fair shares keep their place.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import multiprocessing
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
KEY = "soak-key-0123456789abcdef"
HOSTILE_KEY = "soak-hostile-0123456789abcdef"
HOARD_KEY = "soak-hoarder-0123456789abcdef"
WRAP = "{% set q = question*19 %}{{ (q~q~q~q) | wordwrap(2) }}"
# Freezes on task 3 only (row 0 is rendered when the spec loads, to check the budgets).
FREEZE = (
    "{% if id == 'test-3' %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
    "{% endfor %}{% endif %}{{ question }}"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


COUNTDOWN = """\
name: countdown
dataset: {type: reasoning_gym, num_tasks: 1000, seed: 31, tasks: {countdown: {}}}
splits: {test: {}}
prompt: {template: "{{ question }}"}
grader: {type: reasoning_gym}
"""
# Run by the countdown checker (SymPy's parse_expr is eval): write a full-marks reply on every
# descriptor, as a pickle and as JSON, then exit; or replace every family's checker.
FORGE = (
    "import os, pickle, struct\n"
    "for data in (pickle.dumps(('ok', 1.0)), b'{\"ok\": 1.0}'):\n"
    "    for fd in range(3, 16):\n"
    "        try:\n"
    "            os.write(fd, struct.pack('!I', len(data)) + data)\n"
    "        except OSError:\n"
    "            pass\n"
    "os._exit(0)\n"
)
POISON = (
    "import reasoning_gym.factory as factory\n"
    "for cls, _ in factory.DATASETS.values():\n"
    "    cls.score_answer = lambda self, answer, entry: 0.0\n"
)


def specs(folder: Path) -> list[Path]:
    """The shipped GSM8K, and a copy whose prompt never finishes rendering."""
    gsm8k = ROOT / "envs" / "gsm8k.yaml"
    frozen = gsm8k.read_text().replace("data/", f"{ROOT}/envs/data/").replace("name: gsm8k", "name: frozen")
    frozen = frozen.replace(
        "template_file: prompts/math_final_answer.jinja", f"template: {json.dumps(FREEZE)}"
    )
    (folder / "frozen.yaml").write_text(frozen)
    wrap = gsm8k.read_text().replace("data/", f"{ROOT}/envs/data/").replace("name: gsm8k", "name: wrap")
    wrap = wrap.replace("template_file: prompts/math_final_answer.jinja", f"template: {json.dumps(WRAP)}")
    (folder / "wrap.yaml").write_text(wrap)
    (folder / "countdown.yaml").write_text(COUNTDOWN)
    return [
        gsm8k,
        folder / "frozen.yaml",
        folder / "wrap.yaml",
        ROOT / "envs" / "math500.yaml",
        folder / "countdown.yaml",
        ROOT / "envs" / "reasoning_mix.yaml",
    ]


class Counts:
    def __init__(self) -> None:
        self.episodes = 0
        self.errors: collections.Counter[str] = collections.Counter()
        self.hostile: collections.Counter[str] = collections.Counter()
        self.latencies: list[float] = []
        self.live: set[str] = set()
        """Honest sessions open now (what a client that learned their ids would probe)."""


async def honest(url: str, n: int, counts: Counts, stop: float, num: int) -> None:
    headers = {"X-API-Key": KEY}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:
        i = 0
        while time.monotonic() < stop:
            sid = f"honest-{n}-{i}"
            i += 1
            h = {"X-Session-ID": sid}
            started = time.perf_counter()
            try:
                r = await client.post(
                    "/create", headers=h, json={"split": "train", "index": random.randrange(num)}
                )
                if r.status_code != 200:
                    counts.errors[f"create {r.status_code}"] += 1
                    continue
                counts.live.add(sid)
                r = await client.get("/gsm8k/prompt", headers=h)
                if r.status_code != 200 or not r.json():
                    counts.errors[f"prompt {r.status_code}"] += 1
                r = await client.post(
                    "/gsm8k/call", headers=h, json={"name": "submit", "input": {"answer": "7"}}
                )
                if r.status_code != 200 or "event: end" not in r.text:
                    counts.errors[f"call {r.status_code}"] += 1
                r = await client.post("/delete", headers=h)
                counts.live.discard(sid)
                if r.status_code != 200:
                    counts.errors[f"delete {r.status_code}"] += 1
            except httpx.HTTPError as exc:
                counts.errors[type(exc).__name__] += 1
                continue
            counts.episodes += 1
            counts.latencies.append(time.perf_counter() - started)


async def honest_reasoning(url: str, counts: Counts, stop: float, gold: list[str]) -> None:
    """reasoning_mix's gold answers, graded by the same checker processes the hostile answers
    use: anything but 1.0 is an honest error (a poisoned or forged grade)."""
    headers = {"X-API-Key": KEY}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        i = 0
        while time.monotonic() < stop:
            index = i % len(gold)
            h = {"X-Session-ID": f"rg-{random.random()}"}
            i += 1
            try:
                body = {"env_name": "reasoning_mix", "split": "easy", "index": index}
                r = await client.post("/create", headers=h, json=body)
                if r.status_code != 200:
                    counts.errors[f"rg create {r.status_code}"] += 1
                    continue
                got = await _submit(client, "reasoning_mix", h, gold[index])
                if got != "correct:1.0":
                    counts.errors[f"rg gold graded {got}"] += 1
                await client.post("/delete", headers=h)
            except httpx.HTTPError as exc:
                counts.errors[f"rg {type(exc).__name__}"] += 1
                continue
            counts.episodes += 1


async def raw(port: int, data: bytes, wait: float = 5.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(200), wait)
    except (ConnectionError, TimeoutError):
        return b""
    finally:
        writer.close()


KINDS = [
    "big",
    "header",
    "halfopen",
    "json",
    "sid",
    "range",
    "nokey",
    "freeze",
    "mathfreeze",
    "mathstarve",
    "loopfree",
    "forge",
    "hoard",
    "forgery",
    "poison",
    "crosssession",
    "hoardaddr",
]
HOARD_ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
HOARD_SECONDS = 1.5


async def cross_session(client: httpx.AsyncClient, counts: Counts) -> str:
    """Another key probes a live honest session by its id (as if it had leaked): every route
    must answer as for an unknown session, and nothing of the honest episode may change."""
    if not counts.live:
        return "none-live"
    sid = random.choice(sorted(counts.live))
    h = {"X-API-Key": HOSTILE_KEY, "X-Session-ID": sid}
    probes = [
        await client.post("/ping", headers=h),
        await client.get("/gsm8k/prompt", headers=h),
        await client.get("/gsm8k/messages", headers=h),
        await client.post("/gsm8k/call", headers=h, json={"name": "submit", "input": {"answer": "7"}}),
    ]
    deleted = await client.post("/delete", headers=h)  # idempotent: 200, and nothing is deleted
    codes = [r.status_code for r in probes]
    bound = codes == [404] * len(probes) and deleted.status_code == 200
    return "bound" if bound else "LEAK " + ",".join(map(str, [*codes, deleted.status_code]))


async def hoard_addresses(port: int, per_address: int) -> str:
    """Connections that never finish their headers, ``per_address`` from each of four
    addresses at once, held :data:`HOARD_SECONDS`; what each one got from the server."""

    async def one(address: str) -> str:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))
        except OSError as exc:
            return f"connect-{type(exc).__name__}"
        try:
            writer.write(b"GET /health HTTP/1.1\r\nhost: x\r\nx-slow: ")
            await writer.drain()
            got = await asyncio.wait_for(reader.read(64), HOARD_SECONDS)
            return "closed" if got == b"" else got[9:12].decode(errors="replace")
        except TimeoutError:
            return "held"
        except ConnectionError:
            return "reset"
        finally:
            writer.close()

    results = await asyncio.gather(*(one(a) for a in HOARD_ADDRESSES for _ in range(per_address)))
    tally = collections.Counter(results)
    return ",".join(f"{k}x{n}" for k, n in sorted(tally.items()))


async def _submit(client: httpx.AsyncClient, env: str, h: dict[str, str], answer: str) -> str:
    """Submit ``answer``; the outcome and reward (``"error"`` when none came back)."""
    r = await client.post(f"/{env}/call", headers=h, json={"name": "submit", "input": {"answer": answer}})
    for line in reversed(r.text.splitlines()):
        if line.startswith("data: {"):
            out = json.loads(line[6:]).get("output", {})
            return f"{out.get('metadata', {}).get('outcome')}:{out.get('reward')}"
    return "error"


async def second_round(client: httpx.AsyncClient, kind: str) -> str:
    """One of issue 22's hostile kinds; what it got."""
    key = {"X-API-Key": HOSTILE_KEY}
    h = {**key, "X-Session-ID": f"{kind}-{random.random()}"}
    try:
        if kind in ("forgery", "poison"):
            body = {"env_name": "countdown", "split": "test", "index": random.randrange(1000)}
            r = await client.post("/create", headers=h, json=body)
            if r.status_code != 200:
                return f"create {r.status_code}"
            code = FORGE if kind == "forgery" else POISON
            return await _submit(client, "countdown", h, f"exec({code!r})")  # ungradeable:None
        if kind in ("mathfreeze", "mathstarve"):
            index, answer = (5, "9^{9^{9^{9}}}") if kind == "mathfreeze" else (1, "(1+x)^{3000}")
            body = {"env_name": "math500", "split": "test", "index": index}
            r = await client.post("/create", headers=h, json=body)
            if r.status_code != 200:
                return f"create {r.status_code}"
            return await _submit(client, "math500", h, answer)
        if kind == "loopfree":
            task = {"id": f"long-{random.random()}", "question": "ab " * 3000, "answer": "#### 1"}
            r = await client.post("/create", headers=h, json={"env_name": "wrap", "task_spec": task})
            if r.status_code != 200:
                return f"create {r.status_code}"
            return str((await client.get("/wrap/prompt", headers=h)).status_code)
        if kind == "forge":
            task = (await client.post("/gsm8k/task", headers=key, json={"split": "test", "index": 0})).json()
            forged = (
                {**task["task"], "answer": "#### 999999"} if "task" in task else {"answer": "#### 999999"}
            )
            r = await client.post("/create", headers=h, json={"task_spec": forged})
            if r.status_code != 200:
                return f"create {r.status_code}"
            return await _submit(client, "gsm8k", h, "999999")  # incorrect: graded on the served row
        # hoard: open sessions and keep them until the key's share is refused
        codes: collections.Counter[int] = collections.Counter()
        for _ in range(50):
            hh = {"X-API-Key": HOARD_KEY, "X-Session-ID": f"hoard-{random.random()}"}
            codes[
                (await client.post("/create", headers=hh, json={"split": "train", "index": 0})).status_code
            ] += 1
        return ",".join(f"{c}x{n}" for c, n in sorted(codes.items()))
    finally:
        await client.post("/delete", headers=h)


async def hostile(
    url: str, port: int, counts: Counts, stop: float, kinds: list[str], per_address: int
) -> None:
    key = {"X-API-Key": KEY}
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        while time.monotonic() < stop:
            kind = random.choice(kinds)
            try:
                if kind == "big":
                    r = await client.post("/gsm8k/num_tasks", headers=key, content=b"x" * (2 << 20))
                    status = r.status_code
                elif kind == "header":
                    r = await client.get("/health", headers={"X-Junk": "x" * 32_000})
                    status = r.status_code
                elif kind == "halfopen":
                    got = await raw(port, b"POST /create HTTP/1.1\r\nhost: x\r\n", wait=10)
                    status = "closed" if got == b"" else got[:12].decode()
                elif kind == "json":
                    r = await client.post(
                        "/gsm8k/task",
                        headers={**key, "content-type": "application/json"},
                        content=b'{"split": 1' + b"9" * 30 + b"}",
                    )
                    status = r.status_code
                elif kind == "sid":
                    r = await client.get("/gsm8k/prompt", headers={**key, "X-Session-ID": "s" * 500})
                    status = r.status_code
                elif kind == "range":
                    r = await client.post("/gsm8k/task_range", headers=key, json={"split": "train"})
                    status = r.status_code
                elif kind == "nokey":
                    r = await client.post("/gsm8k/task", json={"split": "train", "index": 0})
                    status = r.status_code
                elif kind in ("mathfreeze", "mathstarve", "loopfree", "forge", "hoard", "forgery", "poison"):
                    status = await second_round(client, kind)
                elif kind == "crosssession":
                    status = await cross_session(client, counts)
                elif kind == "hoardaddr":
                    status = await hoard_addresses(port, per_address)
                else:
                    h = {**key, "X-Session-ID": f"freeze-{random.random()}"}
                    await client.post(
                        "/create", headers=h, json={"env_name": "frozen", "split": "test", "index": 3}
                    )
                    r = await client.get("/frozen/prompt", headers=h)
                    status = r.status_code
                    await client.post("/delete", headers=h)
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            counts.hostile[f"{kind} {status}"] += 1
            await asyncio.sleep(0.05)


async def monitor(proc: psutil.Process, samples: list[tuple[float, float, int]], stop: float) -> None:
    start = time.monotonic()
    while time.monotonic() < stop:
        samples.append((time.monotonic() - start, proc.memory_info().rss / 2**20, proc.num_fds()))
        await asyncio.sleep(5)


def probe_health(port: int, seconds: float, out: Any) -> None:
    """``/health`` on its own keep-alive connection every 50 ms: what a load balancer sees. It
    runs in its own process, ahead of the load (which is niced): in the load's event loop, the
    latency measured would be mostly the load generator's own lag."""
    import http.client

    times: list[float] = []
    stop = time.monotonic() + seconds
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while time.monotonic() < stop:
        started = time.perf_counter()
        try:
            conn.request("GET", "/health")
            response = conn.getresponse()
            response.read()
            ok = response.status == 200
            if response.getheader("connection", "").lower() == "close":
                conn.close()
        except (OSError, http.client.HTTPException):
            conn.close()
            ok = False
        times.append(time.perf_counter() - started if ok else float("inf"))
        time.sleep(0.05)
    out.send(times)


async def run(args: argparse.Namespace, url: str, port: int, proc: psutil.Process) -> dict[str, Any]:
    counts = Counts()
    samples: list[tuple[float, float, int]] = []
    async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": KEY}) as client:
        num = (await client.post("/gsm8k/num_tasks", json={"split": "train"})).json()["num_tasks"]
    from envbuilder.environment import load_environment

    mix = load_environment(ROOT / "envs" / "reasoning_mix.yaml").split("easy")
    gold = [str(mix.task(i)["answer"]) for i in range(50)]
    receiver, sender = multiprocessing.Pipe(duplex=False)
    prober = multiprocessing.get_context("fork").Process(
        target=probe_health, args=(port, args.seconds, sender), daemon=True
    )
    prober.start()
    os.nice(5)  # the load yields to the probe, so the probe measures the server
    stop = time.monotonic() + args.seconds
    started = time.monotonic()
    await asyncio.gather(
        monitor(proc, samples, stop),
        *(honest(url, n, counts, stop, num) for n in range(args.concurrency)),
        *(
            hostile(url, port, counts, stop, args.kinds.split(","), args.hoard_per_address)
            for _ in range(args.hostile)
        ),
        *(honest_reasoning(url, counts, stop, gold) for _ in range(args.reasoning)),
    )
    elapsed = time.monotonic() - started
    health_times: list[float] = await asyncio.to_thread(receiver.recv)
    prober.join(10)
    rss = [s[1] for s in samples]
    fds = [s[2] for s in samples]
    warm = rss[len(rss) // 5 :] or rss  # after the first fifth: caches warm
    return {
        "seconds": round(elapsed, 1),
        "concurrency": args.concurrency,
        "episodes": counts.episodes,
        "episodes_per_s": round(counts.episodes / elapsed, 1),
        "episode_p50_ms": round(statistics.median(counts.latencies) * 1000, 1) if counts.latencies else None,
        "honest_errors": dict(counts.errors),
        "hostile": dict(sorted(counts.hostile.items())),
        "rss_mb": {
            "first": round(rss[0], 1),
            "min_warm": round(min(warm), 1),
            "max_warm": round(max(warm), 1),
            "last": round(rss[-1], 1),
        },
        "fds": {"min": min(fds), "max": max(fds)},
        "health_ms": _percentiles(health_times),
        "grading_processes": len(proc.children()),
    }


def _percentiles(times: list[float]) -> dict[str, Any]:
    ordered = sorted(times)
    if not ordered:
        return {}
    at = lambda q: round(ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000, 1)  # noqa: E731
    return {
        "n": len(ordered),
        "p50": at(0.5),
        "p99": at(0.99),
        "max": at(1.0),
        "failed": ordered.count(float("inf")),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--hostile", type=int, default=4, help="concurrent hostile clients")
    ap.add_argument(
        "--reasoning", type=int, default=2, help="concurrent honest clients submitting reasoning_mix's gold"
    )
    ap.add_argument(
        "--kinds", default=",".join(KINDS), help=f"hostile requests to send, of {','.join(KINDS)}"
    )
    ap.add_argument(
        "--max-connections",
        type=int,
        default=400,
        help="the server's --max-connections (its share per address is a quarter: 100)",
    )
    ap.add_argument(
        "--hoard-per-address",
        type=int,
        default=100,
        help="connections each hoarding address opens (hoardaddr): its share fills the cap",
    )
    ap.add_argument(
        "--pin",
        action="store_true",
        help="the server (and its grading and render processes) on CPU 0, this load on the others",
    )
    args = ap.parse_args()
    if args.pin:
        others = set(os.sched_getaffinity(0)) - {0}
        if not others:
            raise SystemExit("--pin needs two CPUs")
        os.sched_setaffinity(0, others)
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # the hoarders' sockets
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    folder = Path(tempfile.mkdtemp(prefix="soak-"))
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "envbuilder",
        "serve",
        *map(str, specs(folder)),
        "--port",
        str(port),
        "--api-key",
        KEY,
        "--api-key",
        HOSTILE_KEY,
        "--api-key",
        HOARD_KEY,
        "--read-timeout",
        "2",
        "--client-tasks",
        "--max-sessions",
        "2000",  # a quarter per key: the hoarder meets its share, honest clients never
        "--max-connections",
        str(args.max_connections),
    ]
    log = (folder / "server.log").open("w+b")  # a file, not a pipe: a full pipe would stall it
    server = subprocess.Popen(
        ["taskset", "-c", "0", *cmd] if args.pin else cmd,
        stdout=subprocess.DEVNULL,
        stderr=log,
        env={**os.environ, "ENVBUILDER_DATA_ROOTS": str(ROOT / "envs")},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600  # reasoning-gym loads and its confinement is checked
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the server did not start")
            time.sleep(0.2)
        result = asyncio.run(run(args, url, port, psutil.Process(server.pid)))
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    log.seek(0)
    stderr = log.read().decode(errors="replace")
    result["server_log_lines"] = len(stderr.splitlines())
    result["key_in_log"] = KEY in stderr
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
