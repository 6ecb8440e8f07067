#!/usr/bin/env python3
"""What ``envbuilder eval`` itself costs: episodes per second and the eval process's CPU per episode.

A local OpenAI-compatible endpoint (an asyncio app under uvicorn, its own process) answers every
request at once with a ``submit`` call, so the model costs nothing and the figures are the
harness's: the agent loop, the results file, the summary. Each round runs the same episodes
in-process (``LocalBackend``) and against ``envbuilder serve`` (``RemoteBackend``, its own
process), interleaved; medians of the rounds. Then the HTML report of one run is written.

    python bench/eval_throughput.py --tasks 100 --samples 4 --concurrency 16 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chat_app() -> Any:
    call = {"id": "c1", "type": "function", "function": {"name": "submit", "arguments": '{"answer": "72"}'}}
    reply = json.dumps({"id": "x", "object": "chat.completion", "choices": [
        {"index": 0, "finish_reason": "tool_calls",
         "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()  # fmt: skip

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})  # fmt: skip
        await send({"type": "http.response.body", "body": reply})

    return app


def serve_chat(port: int) -> None:
    uvicorn.run(chat_app(), host="127.0.0.1", port=port, log_level="warning", backlog=2048)


def wait_ready(url: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


async def one_run(target: Any, chat_url: str, tasks: int, samples: int, concurrency: int, out: Path) -> float:
    from envbuilder.eval import ChatModel, LocalBackend, RemoteBackend, plan_eval, run_eval, summarize

    backend = await RemoteBackend.connect(target) if isinstance(target, str) else LocalBackend(target)
    model = ChatModel(chat_url, "bench")
    try:
        plan = await plan_eval(backend, model, split="test", limit=tasks, samples=samples, out=out)
        start = time.perf_counter()
        records = await run_eval(backend, model, plan, concurrency=concurrency)
        summarize(records)
        return time.perf_counter() - start
    finally:
        await model.aclose()
        await backend.aclose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    from envbuilder.environment import load_environment
    from envbuilder.eval import write_report

    chat_port, ors_port = free_port(), free_port()
    chat = multiprocessing.get_context("spawn").Process(target=serve_chat, args=(chat_port,), daemon=True)
    chat.start()
    server = subprocess.Popen([sys.executable, "-m", "envbuilder", "serve", str(ROOT / "envs/gsm8k.yaml"),
                               "--host", "127.0.0.1", "--port", str(ors_port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    ors_url, chat_url = f"http://127.0.0.1:{ors_port}", f"http://127.0.0.1:{chat_port}/v1"
    try:
        wait_ready(ors_url + "/health")
        wait_ready(chat_url)
        env = load_environment(ROOT / "envs/gsm8k.yaml")
        episodes = args.tasks * args.samples
        results: dict[str, list[tuple[float, float]]] = {"in-process": [], "remote ORS server": []}
        folder = Path(tempfile.mkdtemp())
        last = folder / "run.jsonl"
        for n in range(args.rounds):
            for name, target in (("in-process", env), ("remote ORS server", ors_url)):
                out = folder / f"{name[:6]}-{n}.jsonl"
                cpu = time.process_time()
                wall = asyncio.run(one_run(target, chat_url, args.tasks, args.samples, args.concurrency, out))
                results[name].append((episodes / wall, (time.process_time() - cpu) * 1000 / episodes))
                last = out
        start = time.perf_counter()
        page, _ = write_report(last)
        report_s = time.perf_counter() - start
    finally:
        server.terminate()
        server.wait(10)
        chat.terminate()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"Run {when} on {os.cpu_count()} cores (shared, loaded); "
          f"{args.tasks} GSM8K tasks × {args.samples} samples, concurrency {args.concurrency}, "
          f"medians of {args.rounds} interleaved rounds.\n")  # fmt: skip
    print("| backend | episodes/s | eval process CPU ms/episode |")
    print("|---|---|---|")
    for name, rows in results.items():
        rate = statistics.median(r[0] for r in rows)
        cpu_ms = statistics.median(r[1] for r in rows)
        print(f"| {name} | {rate:,.0f} | {cpu_ms:.2f} |")
    local, remote = (statistics.median(r[0] for r in rows) for rows in results.values())
    print(f"\nin-process / remote episodes/s: {local / remote:.2f}×")
    size = page.stat().st_size / 1e6
    print(f"HTML report of {episodes} episodes: {report_s:.2f} s, {size:.1f} MB")


if __name__ == "__main__":
    main()
