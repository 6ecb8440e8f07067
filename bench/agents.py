#!/usr/bin/env python3
"""Agent environments through the server: τ²-retail episodes and their tool calls.

Starts ``envbuilder serve`` on envs/tau2_retail.yaml (a copy beside it whose simulated customer
is a local chat server answering at once) with a real ``redis-server`` as the session store, then:

* **episodes**: every one of the 114 tasks played as an agent would: a greeting through
  ``send_message`` (the customer answers), every gold action, a closing message (the customer
  ends the conversation and the episode is graded by ``state_match``): episodes/s at a given
  concurrency, server CPU per tool call, rewards (all must be 1.0) and each session's size in
  Redis after its gold actions (read with ``STRLEN``);
* **tool calls**: sessions making only ``calculate`` calls against sessions making only
  ``get_order_details`` (a declarative read), ``find_user_id_by_name_zip`` (a search of the 500
  users) or ``modify_user_address`` (a declarative write): server CPU per call of each;
* **dual control** (``--dual-only`` runs only this): envs/phone_support.yaml, whose customer has
  tools of its own (its phone's settings), played by the scripted customer of
  ``tests/fakes/phone_customer.py``: every task with its gold actions (the agent's made by the
  agent, the customer's by guidance the customer follows with its tools): episodes/s, server CPU
  per episode and per request, the customer's requests and tool calls per episode, rewards (all
  must be 1.0) and the session's size in Redis.

With ``--python``, instead: the declarative tools against their Python version (the function
tools of bench/tau2_retail_python.py, which the spec had before): the 114 episodes served by
each spec (server CPU per tool call, each session's size in Redis), and CPU µs per call of each
rewritten tool in process, each call on a fresh episode so that every write succeeds.

    python bench/agents.py --concurrency 8 --calls 2000
    python bench/agents.py --python --calls 500
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envbuilder.client import AsyncClient  # noqa: E402
from envbuilder.server._sessions import session_key  # noqa: E402
from tests.fakes import phone_customer  # noqa: E402
from tests.fakes.chat_server import ChatServer, reply  # noqa: E402
from tests.processes import serve_process  # noqa: E402
from tests.redisd import redis_server  # noqa: E402

SPEC = ROOT / "envs" / "tau2_retail.yaml"
COPY = ROOT / "envs" / "_bench_tau2_retail.yaml"
PYTHON_COPY = ROOT / "envs" / "_bench_tau2_retail_python.yaml"
PYTHON_MODULE = ROOT / "envs" / "_bench_tau2_retail_python.py"
#: The tools that were Python functions before the spec declared them as steps, with arguments
#: for the in-process comparison (a pending order paid by gift card, a delivered order).
REWRITTEN: dict[str, dict[str, Any]] = {
    "get_item_details": {"item_id": "9612497925"},
    "list_all_product_types": {},
    "cancel_pending_order": {"order_id": "#W6779827", "reason": "no longer needed"},
    "modify_pending_order_address": {
        "order_id": "#W6779827",
        "address1": "1 Main St",
        "address2": "",
        "city": "Philadelphia",
        "state": "PA",
        "country": "USA",
        "zip": "19122",
    },
    "modify_pending_order_payment": {"order_id": "#W6779827", "payment_method_id": "credit_card_9789590"},
    "modify_user_address": {
        "user_id": "ethan_lopez_6291",
        "address1": "1 Main St",
        "address2": "",
        "city": "Philadelphia",
        "state": "PA",
        "country": "USA",
        "zip": "19122",
    },
    "return_delivered_order_items": {
        "order_id": "#W4817420",
        "item_ids": ["6777246137"],
        "payment_method_id": "gift_card_8168843",
    },
    "transfer_to_human_agents": {"summary": "The customer wants a refund."},
}
CLOSING = "Is there anything else I can help you with?"


def customer(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    said = body["messages"][-1]["content"]
    text = "No, thanks! ###STOP###" if "anything else" in said else "Hi, I need help with my order."
    return 200, reply(text), {}


def gold(split: str, index: int) -> tuple[list[dict[str, Any]], list[str]]:
    import pyarrow.parquet as pq

    rows = pq.read_table(ROOT / f"envs/data/tau2_retail/{split}-00000-of-00001.parquet").to_pylist()
    return json.loads(rows[index]["actions"]), list(rows[index]["communicate_info"])


async def episodes(url: str, redis_url: str, concurrency: int) -> dict[str, Any]:
    import redis

    store = redis.Redis.from_url(redis_url)
    jobs = [(split, i) for split, n in (("train", 74), ("test", 40)) for i in range(n)]
    rewards: list[float | None] = []
    sizes: list[int] = []
    calls = 0
    queue: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)

    async def worker(client: AsyncClient) -> None:
        nonlocal calls
        env = client.environment("tau2_retail")
        while not queue.empty():
            split, index = queue.get_nowait()
            actions, info = gold(split, index)
            async with env.session(split=split, index=index, secrets={"OPENAI_API_KEY": "sk-bench"}) as s:
                await s.call_tool("send_message", {"message": "Hello! How can I help you?"})
                for action in actions:
                    await s.call_tool(action["name"], action["arguments"])
                sizes.append(int(store.strlen("eb:s:" + session_key("addr:127.0.0.1", s.sid))))
                closing = (", ".join(info) + ". " if info else "") + CLOSING
                out = await s.call_tool("send_message", {"message": closing})
                rewards.append(out.reward)
                calls += len(actions) + 2

    started = time.perf_counter()
    async with AsyncClient(url) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    seconds = time.perf_counter() - started
    return {"episodes": len(jobs), "seconds": seconds, "calls": calls, "rewards": rewards, "sizes": sizes}


async def tool_calls(url: str, name: str, args: list[dict[str, Any]], n: int, concurrency: int) -> None:
    """``n`` calls of ``name``, 100 per session (an episode makes at most 200), ``concurrency``
    sessions at a time."""
    async with AsyncClient(url) as client:
        env = client.environment("tau2_retail")
        left = [min(100, n - k) for k in range(0, n, 100)]

        async def worker() -> None:
            while left:
                count = left.pop()
                async with env.session(split="train", index=0) as s:
                    for i in range(count):
                        await s.call_tool(name, args[i % len(args)])

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def in_process(kinds: dict[str, tuple[str, list[dict[str, Any]]]], n: int) -> dict[str, float]:
    """CPU µs per ``call_tool`` of each kind in this process (no HTTP, no store): the tool's own
    cost, with the toolbox's rules and the state's copy-on-access and commit."""
    from envbuilder.environment import Episode, load_environment

    env = load_environment(SPEC)
    task = env.split("train").task(0)
    out = {}

    async def run(name: str, args: list[dict[str, Any]]) -> None:
        for k in range(0, n, 100):
            episode = Episode(task=task)
            for i in range(min(100, n - k)):
                await env.call_tool(episode, name, args[i % len(args)])

    for label, (name, args) in kinds.items():
        asyncio.run(run(name, args))  # warm up
        started = time.process_time()
        asyncio.run(run(name, args))
        out[label] = (time.process_time() - started) / n * 1e6
    return out


PHONE = ROOT / "envs" / "phone_support.yaml"


async def dual_control(url: str, redis_url: str, concurrency: int, rounds: int) -> dict[str, Any]:
    """Every phone_support task ``rounds`` times: a greeting, the agent's gold calls, one
    guidance message per gold call of the customer's tools, a closing message."""
    import redis

    store = redis.Redis.from_url(redis_url)
    lines = (ROOT / "envs/data/phone_support/test.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    queue: asyncio.Queue[int] = asyncio.Queue()
    for _ in range(rounds):
        for i in range(len(rows)):
            queue.put_nowait(i)
    rewards: list[float | None] = []
    sizes: list[int] = []
    requests = user_calls = 0

    async def worker(client: AsyncClient) -> None:
        nonlocal requests, user_calls
        env = client.environment("phone_support")
        while not queue.empty():
            index = queue.get_nowait()
            actions = json.loads(rows[index]["actions"])
            async with env.session(split="test", index=index, secrets={"OPENAI_API_KEY": "sk-bench"}) as s:
                await s.call_tool("send_message", {"message": "Hello! This is support."})
                for action in actions:
                    if action["name"] in phone_customer.USER_TOOLS:
                        said = phone_customer.guidance(action["name"], action["arguments"])
                        out = await s.call_tool("send_message", {"message": said})
                        user_calls += len((out.metadata or {}).get("user_actions", []))
                    else:
                        await s.call_tool(action["name"], action["arguments"])
                sizes.append(int(store.strlen("eb:s:" + session_key("addr:127.0.0.1", s.sid))))
                out = await s.call_tool("send_message", {"message": phone_customer.CLOSING})
                rewards.append(out.reward)
                requests += len(actions) + 2

    started = time.perf_counter()
    async with AsyncClient(url) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    seconds = time.perf_counter() - started
    return {
        "episodes": len(rewards),
        "seconds": seconds,
        "requests": requests,
        "user_calls": user_calls,
        "rewards": rewards,
        "sizes": sizes,
    }


def run_dual(concurrency: int, rounds: int) -> None:
    """Serve envs/phone_support.yaml (its customer at a local scripted chat server, sessions in
    Redis) and print the dual-control table."""
    with ChatServer(phone_customer.customer) as chat, redis_server() as redis:
        # The customer is pointed at the scripted endpoint by flag, without editing the spec.
        args = ["--store", redis.url, "--no-cache", "--user-base-url", chat.base_url]
        with serve_process(str(PHONE), *args) as (url, proc):
            server = psutil.Process(proc.pid)
            asyncio.run(dual_control(url, redis.url, 1, 1))  # warm up
            seen, before = len(chat.requests), cpu(server)
            result = asyncio.run(dual_control(url, redis.url, concurrency, rounds))
            used, asked = cpu(server) - before, len(chat.requests) - seen
    n, rewards, sizes = result["episodes"], result["rewards"], sorted(result["sizes"])
    print(f"| dual control (envs/phone_support.yaml, scripted customer), concurrency {concurrency} | value |")
    print("|---|---|")
    print(f"| episodes | {n} (rewards 1.0: {sum(r == 1.0 for r in rewards)}) |")
    print(f"| episodes/s | {n / result['seconds']:.1f} |")
    print(f"| agent requests per episode (send_message, agent tools) | {result['requests'] / n:.1f} |")
    print(f"| customer model requests per episode | {asked / n:.1f} |")
    print(f"| customer tool calls per episode | {result['user_calls'] / n:.1f} |")
    print(f"| server CPU per episode | {used / n * 1e3:.1f} ms |")
    print(f"| server CPU per agent request | {used / result['requests'] * 1e3:.2f} ms |")
    print(f"| session in Redis before the closing message: median / max | "
          f"{statistics.median(sizes):,.0f} / {max(sizes):,} bytes |")  # fmt: skip


def python_spec(text: str) -> str:
    """The spec with the rewritten tools as the Python functions they were."""
    import yaml

    spec = yaml.safe_load(text)
    spec["tools"] = [
        {"type": "function", "module": PYTHON_MODULE.name, "name": t["name"]}
        if t.get("name") in REWRITTEN
        else t
        for t in spec["tools"]
    ]
    return yaml.safe_dump(spec, sort_keys=False, allow_unicode=True)


def per_tool(spec: Path, n: int) -> dict[str, float]:
    """CPU µs per call of each rewritten tool in process, each call on a fresh episode."""
    from envbuilder.environment import Episode, load_environment

    env = load_environment(spec)
    task = env.split("train").task(0)
    out = {}

    async def run(name: str, args: dict[str, Any]) -> None:
        for _ in range(n):
            result = await env.call_tool(Episode(task=task), name, args)
            assert not (result.output.metadata or {}).get("error"), result  # type: ignore[union-attr]

    for name, args in REWRITTEN.items():
        asyncio.run(run(name, args))  # warm up
        started = time.process_time()
        asyncio.run(run(name, args))
        out[name] = (time.process_time() - started) / n * 1e6
    return out


def compare_python(opts: argparse.Namespace) -> None:
    text = SPEC.read_text()
    PYTHON_MODULE.write_text((ROOT / "bench" / "tau2_retail_python.py").read_text())
    PYTHON_COPY.write_text(python_spec(text))
    results = {}
    try:
        local = {"declarative": per_tool(SPEC, opts.calls), "Python": per_tool(PYTHON_COPY, opts.calls)}
        with ChatServer(customer) as chat, redis_server() as redis:
            COPY.write_text(text.replace("https://api.openai.com/v1", chat.base_url))
            PYTHON_COPY.write_text(python_spec(COPY.read_text()))
            for label, spec in (("declarative", COPY), ("Python", PYTHON_COPY)):
                with serve_process(str(spec), "--store", redis.url) as (url, proc):
                    server = psutil.Process(proc.pid)
                    asyncio.run(episodes(url, redis.url, 1))  # warm up
                    before = cpu(server)
                    result = asyncio.run(episodes(url, redis.url, opts.concurrency))
                    result["cpu"] = cpu(server) - before
                    results[label] = result
    finally:
        for path in (COPY, PYTHON_COPY, PYTHON_MODULE):
            path.unlink(missing_ok=True)
    print(f"machine: {psutil.cpu_count()} cores; server with --store redis; concurrency {opts.concurrency}")
    print()
    print("| τ²-retail, 114 episodes (gold actions) | declarative tools | Python tools | ratio |")
    print("|---|---|---|---|")
    decl, py = results["declarative"], results["Python"]
    rewards = [sum(r == 1.0 for r in x["rewards"]) for x in (decl, py)]
    print(f"| episodes with reward 1.0 | {rewards[0]} | {rewards[1]} | |")
    per_call = [x["cpu"] / x["calls"] * 1e3 for x in (decl, py)]
    ratio = per_call[0] / per_call[1]
    print(f"| server CPU per tool call | {per_call[0]:.2f} ms | {per_call[1]:.2f} ms | {ratio:.2f}× |")
    for stat, fn in (("median", statistics.median), ("max", max)):
        sizes = [fn(x["sizes"]) for x in (decl, py)]
        print(
            f"| session in Redis after the gold actions, {stat} | {sizes[0]:,.0f} B | {sizes[1]:,.0f} B | |"
        )
    print()
    print("| tool (in process, fresh episode per call) | declarative µs | Python µs | ratio |")
    print("|---|---|---|---|")
    for name in REWRITTEN:
        d, p = local["declarative"][name], local["Python"][name]
        print(f"| `{name}` | {d:,.0f} | {p:,.0f} | {d / p:.2f}× |")


def cpu(process: psutil.Process) -> float:
    total = process.cpu_times()
    seconds = total.user + total.system
    for child in process.children(recursive=True):
        t = child.cpu_times()
        seconds += t.user + t.system
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--calls", type=int, default=2000, help="calls per tool in the tool-call comparison")
    parser.add_argument("--dual-rounds", type=int, default=20, help="times each dual-control task is played")
    parser.add_argument("--dual-only", action="store_true", help="run only the dual-control episodes")
    parser.add_argument(
        "--python", action="store_true", help="compare the declarative tools with their Python version"
    )
    opts = parser.parse_args()
    if opts.dual_only:
        run_dual(opts.concurrency, opts.dual_rounds)
        return
    if opts.python:
        compare_python(opts)
        return
    address = {
        "user_id": "yusuf_rossi_9620",
        "address1": "1 Main St",
        "address2": "",
        "city": "Philadelphia",
        "state": "PA",
        "country": "USA",
        "zip": "19122",
    }
    kinds = {
        "calculate (calculator)": ("calculate", [{"expression": "3131.1 + 4777.75 + 367.38"}]),
        "get_order_details (declarative read)": ("get_order_details", [{"order_id": "#W2378156"}]),
        "find_user_id_by_name_zip (search, 500 users)": (
            "find_user_id_by_name_zip",
            [{"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}],
        ),
        "modify_user_address (declarative write)": (
            "modify_user_address",
            [address, {**address, "address1": "2 Main St"}],
        ),
    }
    local = in_process(kinds, opts.calls)
    with ChatServer(customer) as chat, redis_server() as redis:
        COPY.write_text(SPEC.read_text().replace("https://api.openai.com/v1", chat.base_url))
        try:
            with serve_process(str(COPY), "--store", redis.url) as (url, proc):
                server = psutil.Process(proc.pid)
                asyncio.run(episodes(url, redis.url, 1))  # warm up
                before = cpu(server)
                result = asyncio.run(episodes(url, redis.url, opts.concurrency))
                used = cpu(server) - before
                per_kind = {}
                for label, (name, args) in kinds.items():
                    asyncio.run(tool_calls(url, name, args, 200, opts.concurrency))  # warm up
                    before = cpu(server)
                    started = time.perf_counter()
                    asyncio.run(tool_calls(url, name, args, opts.calls, opts.concurrency))
                    per_kind[label] = (
                        (cpu(server) - before) / opts.calls * 1e6,
                        opts.calls / (time.perf_counter() - started),
                    )
        finally:
            COPY.unlink(missing_ok=True)
    rewards = result["rewards"]
    sizes = sorted(result["sizes"])
    print(f"machine: {psutil.cpu_count()} cores; server with --store redis; concurrency {opts.concurrency}")
    print()
    print("| τ²-retail episodes (gold actions, simulated customer) | value |")
    print("|---|---|")
    print(f"| episodes | {result['episodes']} (rewards 1.0: {sum(r == 1.0 for r in rewards)}) |")
    print(f"| episodes/s | {result['episodes'] / result['seconds']:.1f} |")
    print(f"| tool calls per episode (incl. 2 send_message) | {result['calls'] / result['episodes']:.1f} |")
    print(f"| server CPU per tool call | {used / result['calls'] * 1e3:.2f} ms |")
    median, largest = statistics.median(sizes), max(sizes)
    print(f"| session in Redis after the gold actions: median / max | {median:,.0f} / {largest:,} bytes |")
    print()
    print("| tool | server CPU µs per call (HTTP, Redis) | calls/s | CPU µs per call in process |")
    print("|---|---|---|---|")
    for label, (micro, rate) in per_kind.items():
        print(f"| {label} | {micro:,.0f} | {rate:,.0f} | {local[label]:,.0f} |")
    print()
    run_dual(opts.concurrency, opts.dual_rounds)


if __name__ == "__main__":
    main()
