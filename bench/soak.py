"""Soak: honest episodes at a fixed concurrency against `envbuilder serve`, mixed with hostile
requests, for a fixed time; reports episodes, errors, and the server's RSS and descriptors.

    python bench/soak.py --seconds 600 --concurrency 64

Honest clients run create -> prompt -> submit -> delete and count every unexpected answer as an
error. Hostile clients, alongside, send: 2 MB bodies (413), 32 KB headers (431), half-sent
requests left open (closed by the read timeout), malformed JSON and bad session ids (4xx),
oversized task_range pages (400), requests without the API key (401), and a runaway template
(cut off by its deadline while everyone else keeps going).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
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
# Freezes on task 3 only (row 0 is rendered when the spec loads, to check the budgets).
FREEZE = (
    "{% if id == 'test-3' %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
    "{% endfor %}{% endif %}{{ question }}"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def specs(folder: Path) -> list[Path]:
    """The shipped GSM8K, and a copy whose prompt never finishes rendering."""
    gsm8k = ROOT / "envs" / "gsm8k.yaml"
    frozen = gsm8k.read_text().replace("data/", f"{ROOT}/envs/data/").replace("name: gsm8k", "name: frozen")
    frozen = frozen.replace(
        "template_file: prompts/math_final_answer.jinja", f"template: {json.dumps(FREEZE)}"
    )
    (folder / "frozen.yaml").write_text(frozen)
    return [gsm8k, folder / "frozen.yaml"]


class Counts:
    def __init__(self) -> None:
        self.episodes = 0
        self.errors: collections.Counter[str] = collections.Counter()
        self.hostile: collections.Counter[str] = collections.Counter()
        self.latencies: list[float] = []


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
                r = await client.get("/gsm8k/prompt", headers=h)
                if r.status_code != 200 or not r.json():
                    counts.errors[f"prompt {r.status_code}"] += 1
                r = await client.post(
                    "/gsm8k/call", headers=h, json={"name": "submit", "input": {"answer": "7"}}
                )
                if r.status_code != 200 or "event: end" not in r.text:
                    counts.errors[f"call {r.status_code}"] += 1
                r = await client.post("/delete", headers=h)
                if r.status_code != 200:
                    counts.errors[f"delete {r.status_code}"] += 1
            except httpx.HTTPError as exc:
                counts.errors[type(exc).__name__] += 1
                continue
            counts.episodes += 1
            counts.latencies.append(time.perf_counter() - started)


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


KINDS = ["big", "header", "halfopen", "json", "sid", "range", "nokey", "freeze"]


async def hostile(url: str, port: int, counts: Counts, stop: float, kinds: list[str]) -> None:
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


async def run(args: argparse.Namespace, url: str, port: int, proc: psutil.Process) -> dict[str, Any]:
    counts = Counts()
    samples: list[tuple[float, float, int]] = []
    async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": KEY}) as client:
        num = (await client.post("/gsm8k/num_tasks", json={"split": "train"})).json()["num_tasks"]
    stop = time.monotonic() + args.seconds
    started = time.monotonic()
    await asyncio.gather(
        monitor(proc, samples, stop),
        *(honest(url, n, counts, stop, num) for n in range(args.concurrency)),
        *(hostile(url, port, counts, stop, args.kinds.split(",")) for _ in range(args.hostile)),
    )
    elapsed = time.monotonic() - started
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
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--hostile", type=int, default=4, help="concurrent hostile clients")
    ap.add_argument(
        "--kinds", default=",".join(KINDS), help=f"hostile requests to send, of {','.join(KINDS)}"
    )
    args = ap.parse_args()
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
        "--read-timeout",
        "2",
    ]
    log = (folder / "server.log").open("w+b")  # a file, not a pipe: a full pipe would stall it
    server = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=log,
        env={**os.environ, "ENVBUILDER_DATA_ROOTS": str(ROOT / "envs")},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
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
