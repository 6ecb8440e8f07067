"""What N threads made ready at once cost in CPython, with and without the sync client's loop hop.

N threads wait on one barrier; once it opens, each either exits (``none``: the harness alone) or
runs one coroutine on a :class:`envbuilder.threadloop.LoopThread` (``client``), the coroutines
released 100 every 10 ms (a pool of 100 connections), or does so once admitted by the sync
client's :class:`envbuilder.client._admission.Admission` of 110 permits (``admitted``). Prints
CPU per thread (user, system) and context switches per thread, for the process:

    python bench/thread_wakeups.py 16384 none
    python bench/thread_wakeups.py 4096 client [CHECKOUT]
    python bench/thread_wakeups.py 16384 admitted
"""

from __future__ import annotations

import asyncio
import collections
import resource
import sys
import threading
import time

N, MODE = int(sys.argv[1]), sys.argv[2]
if len(sys.argv) > 3:
    sys.path.insert(0, sys.argv[3])

from envbuilder.threadloop import LoopThread  # noqa: E402

if MODE == "admitted":
    from envbuilder.client._admission import Admission

    admission = Admission(110)

threading.stack_size(256 * 1024)
portal = LoopThread("bench")
waiters: collections.deque[asyncio.Future[None]] = collections.deque()


async def request() -> None:
    fut = asyncio.get_running_loop().create_future()
    waiters.append(fut)
    await fut


async def releaser(total: int) -> None:
    done = 0
    while done < total:
        await asyncio.sleep(0.01)
        for _ in range(min(100, len(waiters))):
            waiters.popleft().set_result(None)
            done += 1


start = threading.Barrier(N + 1)
finished = threading.Semaphore(0)


def one() -> None:
    start.wait()
    if MODE == "client":
        portal.run(request())
    elif MODE == "admitted":
        admission.enter()
        try:
            portal.run(request())
        finally:
            admission.leave()
    finished.release()


threads = [threading.Thread(target=one, daemon=True) for _ in range(N)]
for t in threads:
    t.start()
portal.submit(releaser(0 if MODE == "none" else N))
t0 = time.perf_counter()
r0 = resource.getrusage(resource.RUSAGE_SELF)
start.wait()
for _ in range(N):
    finished.acquire()
for t in threads:
    t.join()
r1 = resource.getrusage(resource.RUSAGE_SELF)
user, system = (r1.ru_utime - r0.ru_utime) / N * 1e6, (r1.ru_stime - r0.ru_stime) / N * 1e6
print(
    f"N={N} {MODE}: wall {time.perf_counter() - t0:.2f} s, CPU per thread {user + system:.0f} µs "
    f"(user {user:.0f}, system {system:.0f}), voluntary switches per thread "
    f"{(r1.ru_nvcsw - r0.ru_nvcsw) / N:.1f}"
)
