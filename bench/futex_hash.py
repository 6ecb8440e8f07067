"""One lock handed back and forth between two threads while N other threads sleep on locks of
their own: CPU per round trip with the kernel's futex hash as it sized it, and after
``envbuilder.client._futex.fit`` grew it to the process's threads (Linux 6.16+).

Each (N, sized) runs in a fresh process; the table's slots are read back with
``prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS)``.

    python bench/futex_hash.py --sleepers 0 1000 4000 16000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time

ROUND_TRIPS = 20_000


def child(sleepers: int, sized: bool) -> dict[str, float]:
    import ctypes

    prctl = ctypes.CDLL(None).prctl
    threading.stack_size(256 * 1024)
    locks = []
    for _ in range(sleepers):
        lock = threading.Lock()
        lock.acquire()
        threading.Thread(target=lock.acquire, daemon=True).start()
        locks.append(lock)
    ping, pong = threading.Lock(), threading.Lock()
    ping.acquire()
    pong.acquire()

    def other() -> None:
        for _ in range(ROUND_TRIPS):
            ping.acquire()
            pong.release()

    thread = threading.Thread(target=other)
    thread.start()
    resize_ms = 0.0
    if sized:
        from envbuilder.client import _futex

        t = time.perf_counter()
        _futex.fit(threading.active_count())
        resize_ms = 1000 * (time.perf_counter() - t)
    slots = prctl(78, 2, 0, 0, 0)
    c0 = time.process_time()
    for _ in range(ROUND_TRIPS):
        ping.release()
        pong.acquire()
    cpu = time.process_time() - c0
    thread.join()
    return {
        "sleepers": sleepers,
        "sized": sized,
        "slots": slots,
        "resize_ms": resize_ms,
        "cpu_us_per_round_trip": 1e6 * cpu / ROUND_TRIPS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sleepers", type=int, nargs="+", default=[0, 1000, 4000, 16000])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1] == "1")))
        return
    for n in args.sleepers:
        for sized in (False, True):
            cmd = [sys.executable, __file__, "--child", str(n), "1" if sized else "0"]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            print(done.stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
