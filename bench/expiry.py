"""Session expiry and cleanup cost against the number of sessions held (issue 37, item 1).

* In memory: the reaper's ``SessionStore.sweep`` every 5 s, timed with 1,000 to 100,000
  sessions held, when none has expired (the usual case) and when 1 % has; beside it the sweep
  as it was before (a scan of every session), on the same store.
* In Redis: sessions expire by their TTL (Redis's own active expiry; the ``live`` and ``by:``
  sets are trimmed by the next creates, at most 200 entries each). redis-server's CPU per
  expired session key, for 10,000 and 100,000 session records of the size a GSM8K tools
  episode stores, all expiring together.

    python bench/expiry.py
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envbuilder.episode import Episode  # noqa: E402
from envbuilder.server._calls import CallRegistry  # noqa: E402
from envbuilder.server._sessions import SessionRecord, SessionStore  # noqa: E402


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def full_scan(store: SessionStore, seconds: float, now: float) -> list[str]:
    """The sweep before issue 37: every session looked at."""
    cutoff = now - seconds
    return [key for key, s in store._sessions.items() if s.last_seen < cutoff]


def best(fn, repeat: int = 7) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


async def _fill(store: SessionStore, clock: Clock, n: int) -> None:
    episode = Episode(task={"id": "test-0"})
    for i in range(n):
        clock.now = float(i)
        await store.add(SessionRecord(sid=f"s{i}", env="gsm8k", episode=episode, client="key:a"))


def memory(sizes: list[int]) -> list[str]:
    import asyncio

    rows = [
        "| sessions held | sweep, none expired (µs) | sweep, 1 % expired (µs) | before: full scan (µs) |",
        "|---|---|---|---|",
    ]
    for n in sizes:
        clock = Clock()
        store = SessionStore(CallRegistry(60), clock)
        asyncio.run(_fill(store, clock, n))
        clock.now = float(n)
        none = best(lambda: store.sweep(n + 1))  # noqa: B023
        scan = best(lambda: full_scan(store, n + 1, float(n)))  # noqa: B023
        # 1 %: the oldest hundredth expires (the sweep removes them: refill between repeats).
        cut = n - n // 100
        times = []
        for _ in range(5):
            t = time.perf_counter()
            gone = store.sweep(cut)
            times.append(time.perf_counter() - t)
            assert len(gone) == n // 100
            for s in gone:  # back at the front, as they were
                store._sessions[s.key] = s
                store._sessions.move_to_end(s.key, last=False)
                store._per_client[s.client] = store._per_client.get(s.client, 0) + 1
        rows.append(f"| {n:,} | {1e6 * none:,.1f} | {1e6 * min(times):,.0f} | {1e6 * scan:,.0f} |")
    return rows


def redis_expiry(sizes: list[int], value_bytes: int) -> list[str]:
    rows = [
        "| session keys expiring together | redis-server CPU µs per expired key | seconds until all gone |",
        "|---|---|---|",
    ]
    folder = tempfile.mkdtemp(prefix="expiry-redis-")
    port = 6390 + os.getpid() % 500
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", folder],
        stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        r = redis.Redis(port=port)
        me = psutil.Process(proc.pid)
        value = b"x" * value_bytes
        for n in sizes:
            pipe = r.pipeline(transaction=False)
            for i in range(n):
                pipe.set(f"eb:s:key:a/{i}", value, px=3000)
                if i % 1000 == 999:
                    pipe.execute()
            pipe.execute()
            time.sleep(0.2)
            cpu0 = sum(me.cpu_times()[:2])
            t = time.monotonic()
            while r.dbsize():
                time.sleep(0.05)
            # The CPU of the expiry: all keys gone, minus what an idle server costs meanwhile.
            wall = time.monotonic() - t
            cpu = sum(me.cpu_times()[:2]) - cpu0
            time.sleep(wall)
            idle = sum(me.cpu_times()[:2]) - cpu0 - cpu
            rows.append(f"| {n:,} | {1e6 * max(cpu - idle, 0) / n:.2f} | {wall:.1f} |")
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(folder, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--redis-sizes", default="10000,100000")
    ap.add_argument("--value-bytes", type=int, default=2800, help="a stored GSM8K tools session")
    args = ap.parse_args()
    print(f"load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("\n".join(memory([int(s) for s in args.sizes.split(",")])))
    print()
    if shutil.which("redis-server"):
        print("\n".join(redis_expiry([int(s) for s in args.redis_sizes.split(",")], args.value_bytes)))
    print(f"load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
