#!/usr/bin/env python3
"""A grader that waits on I/O never blocks other sessions.

Serves a GSM8K spec graded by ``llm_judge`` (``envbuilder serve`` in a subprocess, pinned to
CPU 0) against a local OpenAI-compatible endpoint that answers every request after
``--latency`` seconds (an asyncio server: it never queues requests). Then runs ``--episodes``
full episodes at once (create_session → create → prompt → call submit → delete) and reports
the wall time against one judge call (the ideal) and ``episodes × latency`` (a server that
serialises judge calls).

    python bench/judge_concurrency.py --episodes 64 --latency 0.05
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import uvicorn

ROOT = Path(__file__).resolve().parent.parent

SPEC = """\
name: judged
dataset:
  type: parquet
  files: {{test: {data}}}
splits: {{test: {{}}}}
prompt: {{template: "{{{{ question }}}}"}}
grader:
  type: llm_judge
  base_url: {base_url}
  model: judge-1
  question: "{{{{ question }}}}"
  reference: "{{{{ answer.split('####')[-1] }}}}"
  api_key_env: BENCH_JUDGE_KEY
  cache: false
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_judge(latency: float, port: int) -> None:
    os.sched_setaffinity(0, {1})
    uvicorn.run(judge_app(latency), host="127.0.0.1", port=port, log_level="warning", backlog=2048)


def judge_app(latency: float) -> Any:
    reply = json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "model": "judge-1",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "VERDICT: CORRECT"},
                }
            ],
        }
    ).encode()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        await asyncio.sleep(latency)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": reply})

    return app


async def episode(client: httpx.AsyncClient, index: int) -> float:
    start = time.perf_counter()
    r = await client.post("/create_session")
    sid = r.text.split("data: ", 1)[1].split("\r\n", 1)[0]
    h = {"X-Session-ID": sid}
    (await client.post("/create", headers=h, json={"split": "test", "index": index})).raise_for_status()
    (await client.get("/judged/prompt", headers=h)).raise_for_status()
    r = await client.post("/judged/call", headers=h, json={"name": "submit", "input": {"answer": "1"}})
    assert "event: end" in r.text, r.text
    await client.post("/delete", headers=h)
    return time.perf_counter() - start


async def run(url: str, episodes: int) -> tuple[float, list[float]]:
    limits = httpx.Limits(max_connections=episodes * 2, max_keepalive_connections=episodes * 2)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        await asyncio.gather(*(episode(client, i) for i in range(4)))  # warm up
        start = time.perf_counter()
        times = await asyncio.gather(*(episode(client, i) for i in range(episodes)))
        return time.perf_counter() - start, sorted(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.05)
    args = ap.parse_args()

    judge_port, port = free_port(), free_port()
    # The fake judge runs in a process of its own (on the harness's core), so that neither it
    # nor the harness shares the server's core or the harness's interpreter.
    judge = multiprocessing.get_context("spawn").Process(
        target=serve_judge, args=(args.latency, judge_port), daemon=True
    )
    judge.start()
    spec = Path(tempfile.mkdtemp()) / "judged.yaml"
    spec.write_text(
        SPEC.format(
            data=ROOT / "envs/data/gsm8k/test-00000-of-00001.parquet",
            base_url=f"http://127.0.0.1:{judge_port}/v1",
        )
    )
    # The spec is written to a temporary folder but reads envs/data: let the server read envs/.
    env = {**os.environ, "BENCH_JUDGE_KEY": "sk-bench", "ENVBUILDER_DATA_ROOTS": str(ROOT / "envs")}
    os.sched_setaffinity(0, {1})  # the harness
    server = subprocess.Popen(
        [
            "taskset",
            "-c",
            "0",
            sys.executable,
            "-m",
            "envbuilder",
            "serve",
            str(spec),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url + "/health").status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        proc = psutil.Process(server.pid)
        before = sum(proc.cpu_times()[:2])
        wall, times = asyncio.run(run(url, args.episodes))
        cpu = sum(proc.cpu_times()[:2]) - before
    finally:
        server.terminate()
        server.wait(timeout=10)
        judge.terminate()
    serial = args.episodes * args.latency
    print(
        f"{args.episodes} concurrent judged episodes, judge latency {args.latency * 1e3:.0f} ms: "
        f"wall {wall * 1e3:.0f} ms (one judge call: {args.latency * 1e3:.0f} ms; judge calls "
        f"serialised: {serial * 1e3:.0f} ms); episode p50 {times[len(times) // 2] * 1e3:.0f} ms, "
        f"max {times[-1] * 1e3:.0f} ms; server CPU {cpu / args.episodes * 1e3:.2f} ms per episode"
    )


if __name__ == "__main__":
    main()
