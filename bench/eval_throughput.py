#!/usr/bin/env python3
"""What ``envbuilder eval`` itself costs: episodes per second and the eval process's CPU per episode.

A local OpenAI-compatible endpoint (``scripted_endpoint.py``: an asyncio app under uvicorn, its
own process) answers every request at once, right on 70 % of the prompts, so the model costs
nothing and the figures are the harness's: the agent loop, the results file, the summary.
Each round runs, interleaved: GSM8K in-process (``LocalBackend``) and against ``envbuilder
serve`` (``RemoteBackend``, its own process) with tool answers; GSM8K in-process with text
answers; and three environments (GSM8K, MATH-500, MMLU-STEM) in-process with tool and with
text answers. Medians of the rounds. Then the HTML report of one run is written, and a run of
``--regrade-episodes`` episodes (GSM8K's stored records repeated as samples) is regraded.

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


THREE = ["envs/gsm8k.yaml", "envs/math500.yaml", "envs/mmlu_stem.yaml"]


def serve_chat(port: int, tasks: int) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from scripted_endpoint import app, gold_answers

    golds = gold_answers([ROOT / s for s in THREE], tasks)
    uvicorn.run(app(golds, 0.7), host="127.0.0.1", port=port, log_level="warning", backlog=2048)


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


async def one_run(
    targets: list[Any], chat_url: str, tasks: int, samples: int, concurrency: int, out: Path, answer: str
) -> tuple[float, int]:
    """Run every target as the CLI does (one after another, one results file each); the wall
    time and the number of episodes."""
    from envbuilder.eval import ChatModel, LocalBackend, RemoteBackend, plan_eval, run_eval, summarize

    model = ChatModel(chat_url, "bench")
    wall, episodes = 0.0, 0
    try:
        for target in targets:
            backend = await RemoteBackend.connect(target) if isinstance(target, str) else LocalBackend(target)
            try:
                start = time.perf_counter()
                plan = await plan_eval(
                    backend,
                    model,
                    split="test",
                    limit=tasks,
                    samples=samples,
                    out=out / f"{backend.env_name}.jsonl",
                    answer=answer,
                )  # type: ignore[arg-type]
                records = await run_eval(backend, model, plan, concurrency=concurrency)
                summarize(records)
                wall += time.perf_counter() - start
                episodes += len(records)
            finally:
                await backend.aclose()
    finally:
        await model.aclose()
    return wall, episodes


def regrade_speed(stored: Path, env: Any, episodes: int, folder: Path) -> tuple[int, float]:
    """Repeat ``stored``'s records as samples up to ``episodes``; regrade that run on ``env``."""
    from envbuilder.eval import regrade_run

    lines = stored.read_text().splitlines()
    header, records = json.loads(lines[0]), [json.loads(x) for x in lines[1:]]
    big = folder / "big.jsonl"
    copies = -(-episodes // len(records))
    per_task = int(header["run"]["samples"])
    header["run"]["samples"] = copies * per_task
    with big.open("w") as f:
        f.write(json.dumps(header) + "\n")
        for copy in range(copies):
            for r in records:
                f.write(json.dumps({**r, "sample": copy * per_task + int(r.get("sample") or 0)}) + "\n")
    start = time.perf_counter()
    result = asyncio.run(regrade_run(big, env, folder / "big.regraded.jsonl"))
    return result.before.episodes, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--regrade-episodes", type=int, default=10_000)
    args = ap.parse_args()

    from envbuilder.environment import load_environment
    from envbuilder.eval import write_report

    chat_port, ors_port = free_port(), free_port()
    chat = multiprocessing.get_context("spawn").Process(
        target=serve_chat, args=(chat_port, args.tasks), daemon=True
    )
    chat.start()
    server = subprocess.Popen([sys.executable, "-m", "envbuilder", "serve", str(ROOT / "envs/gsm8k.yaml"),
                               "--host", "127.0.0.1", "--port", str(ors_port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    ors_url, chat_url = f"http://127.0.0.1:{ors_port}", f"http://127.0.0.1:{chat_port}/v1"
    try:
        wait_ready(ors_url + "/health")
        wait_ready(chat_url)
        envs = [load_environment(ROOT / s) for s in THREE]
        configs: dict[str, tuple[list[Any], str]] = {
            "1 env (GSM8K), tool answers, in-process": ([envs[0]], "tool"),
            "1 env (GSM8K), tool answers, remote ORS server": ([ors_url], "tool"),
            "1 env (GSM8K), text answers, in-process": ([envs[0]], "text"),
            "3 envs, tool answers, in-process": (envs, "tool"),
            "3 envs, text answers, in-process": (envs, "text"),
        }
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
        folder = Path(tempfile.mkdtemp())
        for n in range(args.rounds):
            for i, (name, (targets, answer)) in enumerate(configs.items()):
                out = folder / f"{i}-{n}"
                cpu = time.process_time()
                wall, episodes = asyncio.run(
                    one_run(targets, chat_url, args.tasks, args.samples, args.concurrency, out, answer)
                )
                results[name].append((episodes / wall, (time.process_time() - cpu) * 1000 / episodes))
        last = folder / f"0-{args.rounds - 1}" / "gsm8k.jsonl"
        start = time.perf_counter()
        page, _ = write_report(last)
        report_s = time.perf_counter() - start
        regraded, regrade_s = regrade_speed(last, envs[0], args.regrade_episodes, folder)
    finally:
        server.terminate()
        server.wait(10)
        chat.terminate()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"Run {when} on {os.cpu_count()} cores (shared, loaded); "
          f"{args.tasks} tasks × {args.samples} samples per environment, concurrency {args.concurrency}, "
          f"medians of {args.rounds} interleaved rounds.\n")  # fmt: skip
    print("| run | episodes/s | eval process CPU ms/episode |")
    print("|---|---|---|")
    for name, rows in results.items():
        rate = statistics.median(r[0] for r in rows)
        cpu_ms = statistics.median(r[1] for r in rows)
        print(f"| {name} | {rate:,.0f} | {cpu_ms:.2f} |")
    size = page.stat().st_size / 1e6
    print(f"\nHTML report of {args.tasks * args.samples} episodes: {report_s:.2f} s, {size:.1f} MB")
    print(
        f"Regrade of {regraded:,} episodes (no model calls): {regrade_s:.1f} s, "
        f"{regraded / regrade_s:,.0f} episodes/s"
    )


if __name__ == "__main__":
    main()
