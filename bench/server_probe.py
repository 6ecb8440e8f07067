"""``envbuilder serve`` with timers inside it: where a call's time goes on the server's side.

Not a benchmark by itself: ``open_episodes.py --probe`` starts its one-worker server through this
script instead of the ``envbuilder`` command, so that the client's time per call kind can be read
beside the server's. It runs the same command (``python bench/server_probe.py serve ...``) with:

* every request timed in the server, from the moment the ASGI application receives it to the last
  byte of its answer (an SSE stream's end), under the kind the load generator names in its
  ``X-Bench-Kind`` header (the server itself ignores the header);
* the event loop's lag: a task that asks to wake every 5 ms records how late it wakes (anything
  synchronous on the loop: grading, JSON, pydantic, the GC);
* every garbage collection's pause, by generation (``gc.callbacks``).

Every 60 s it appends one JSON line of that window's figures to ``$PROBE_OUT``, and one line of the
whole run's on SIGUSR1. Timers cost a ``perf_counter`` pair per request and per wake-up.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import json
import os
import signal
import sys
import threading
import time
from typing import Any

LAG_TICK = 0.005
"""Seconds between the lag task's wake-ups."""
STALL = 0.05
"""A wake-up later than this is a stall: its wall time is set beside the loop thread's CPU time
(busy on the loop, or not running: descheduled, or waiting for the interpreter lock)."""


def runqueue_wait() -> float:
    """Seconds this thread has been runnable without a core (``/proc/thread-self/schedstat``)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except OSError:
        return 0.0


def stack_of(frame: Any) -> str:
    """The innermost frames of a stack, as ``file:function`` from the outside in."""
    names = []
    while frame is not None and len(names) < 14:
        code = frame.f_code
        names.append(f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_name}")
        frame = frame.f_back
    return " < ".join(names)


class Probe:
    def __init__(self, out: str) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.calls: dict[str, list[float]] = {}
        self.lags: list[float] = []
        self.stalls: list[tuple[float, float, float]] = []
        """Lags over ``STALL`` s: (wall s, the loop thread's CPU s meanwhile, and its seconds
        runnable but waiting for a core: the kernel's run-queue delay)."""
        self.stacks: collections.Counter[str] = collections.Counter()
        """The loop thread's stack, sampled by the watchdog while the loop is late."""
        self.beat = time.monotonic()
        self.loop_thread = 0
        self.gcs: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self.marks: tuple[dict[str, int], int, dict[int, int]] = ({}, 0, {0: 0, 1: 0, 2: 0})
        self.t0 = time.monotonic()
        self._gc_start = 0.0
        self.marks_stalls = 0

    # -- the garbage collector --------------------------------------------------------------------
    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.gcs[int(info["generation"])].append(time.perf_counter() - self._gc_start)

    # -- the event loop ---------------------------------------------------------------------------
    async def lag(self) -> None:
        loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        while True:
            t, cpu, waited = loop.time(), time.thread_time(), runqueue_wait()
            self.beat = time.monotonic()
            await asyncio.sleep(LAG_TICK)
            late = max(0.0, loop.time() - t - LAG_TICK)
            self.lags.append(late)
            if late > STALL:
                self.stalls.append((late, time.thread_time() - cpu, runqueue_wait() - waited))

    def watchdog(self) -> None:
        """Sample the loop thread's stack every 10 ms while the loop is over ``STALL`` s late."""
        while True:
            time.sleep(0.01)
            if self.loop_thread and time.monotonic() - self.beat > STALL + LAG_TICK:
                frame = sys._current_frames().get(self.loop_thread)
                if frame is not None:
                    self.stacks[stack_of(frame)] += 1

    def app(self, inner: Any) -> Any:
        started = False

        async def timed(scope: dict[str, Any], receive: Any, send: Any) -> None:
            nonlocal started
            if not started:
                started = True
                asyncio.get_running_loop().create_task(self.lag())
            if scope["type"] != "http":
                return await inner(scope, receive, send)
            kind = "other"
            for name, value in scope["headers"]:
                if name == b"x-bench-kind":
                    kind = value.decode()
            t = time.perf_counter()

            async def sent(message: dict[str, Any]) -> None:
                await send(message)
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    self.calls.setdefault(kind, []).append(time.perf_counter() - t)

            await inner(scope, receive, sent)

        return timed

    # -- the figures ------------------------------------------------------------------------------
    def figures(self, whole: bool) -> dict[str, Any]:
        calls0, lags0, gcs0 = ({}, 0, {0: 0, 1: 0, 2: 0}) if whole else self.marks
        out: dict[str, Any] = {"s": round(time.monotonic() - self.t0), "whole": whole}
        out["server_ms"] = {
            k: summary(xs[calls0.get(k, 0) :])
            for k, xs in sorted(self.calls.items())
            if xs[calls0.get(k, 0) :]
        }
        lags = self.lags[lags0:]
        out["loop_lag_ms"] = summary(lags) | {
            "over_50ms_s": round(sum(x for x in lags if x > 0.05), 2),
            "over_200ms": sum(1 for x in lags if x > 0.2),
        }
        out["gc_ms"] = {
            f"gen{g}": summary(xs[gcs0[g] :]) | {"total_s": round(sum(xs[gcs0[g] :]), 3)}
            for g, xs in self.gcs.items()
            if xs[gcs0[g] :]
        }
        stalls = self.stalls if whole else self.stalls[self.marks_stalls :]
        out["stalls"] = {
            "over_ms": 1000 * STALL,
            "n": len(stalls),
            "wall_s": round(sum(w for w, _, _ in stalls), 2),
            "loop_thread_cpu_s": round(sum(c for _, c, _ in stalls), 2),
            "loop_thread_waiting_for_a_core_s": round(sum(r for _, _, r in stalls), 2),
        }
        if whole:
            out["stall_stacks"] = [(n, st) for st, n in self.stacks.most_common(12)]
        out["gc_frozen"] = gc.get_freeze_count()
        out["gc_tracked"] = sum(c for c in gc.get_count())
        if not whole:
            self.marks_stalls = len(self.stalls)
            self.marks = (
                {k: len(v) for k, v in self.calls.items()},
                len(self.lags),
                {g: len(v) for g, v in self.gcs.items()},
            )
        return out

    def write(self, whole: bool) -> None:
        with self.lock, open(self.out, "a") as f:
            f.write(json.dumps(self.figures(whole)) + "\n")

    def ticker(self) -> None:
        while True:
            time.sleep(60)
            self.write(False)


def summary(xs: list[float]) -> dict[str, Any]:
    if not xs:
        return {"n": 0}
    s = sorted(xs)
    p50, p99 = s[len(s) // 2], s[min(len(s) - 1, int(len(s) * 0.99))]
    return {
        "n": len(s),
        "p50": round(1000 * p50, 2),
        "p99": round(1000 * p99, 2),
        "max": round(1000 * s[-1], 1),
        "p99/p50": round(p99 / p50, 1) if p50 > 1e-6 else None,
    }


def main() -> None:
    probe = Probe(os.environ["PROBE_OUT"])
    gc.callbacks.append(probe.on_gc)
    import uvicorn

    run = uvicorn.run

    def timed_run(app: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("workers", 1) not in (None, 1):
            raise SystemExit("server_probe.py times one worker (the workers are separate processes)")
        return run(probe.app(app), *args, **kwargs)

    uvicorn.run = timed_run
    # uvicorn re-raises the SIGTERM it shut down on once it has: exit, so that atexit runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # The whole run's line, asked for by the bench before it stops the server (atexit may not
    # run when the shutdown outlasts the bench's patience).
    signal.signal(signal.SIGUSR1, lambda *_: probe.write(True))
    threading.Thread(target=probe.ticker, daemon=True).start()
    threading.Thread(target=probe.watchdog, daemon=True).start()
    from envbuilder.cli import main as cli

    sys.argv = ["envbuilder", *sys.argv[1:]]
    cli()


if __name__ == "__main__":
    main()
