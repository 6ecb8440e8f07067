"""A crowd of sync-client callers grows the process's futex hash to its threads (Linux 6.16+).

Each case runs in a fresh interpreter: the table is the process's, and so is what ``_futex``
remembers of it."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import textwrap
import threading

import pytest

GET_SLOTS = "prctl(78, 2, 0, 0, 0)"


def private_futex_hash() -> bool:
    """Whether this kernel has a per-process futex hash that a process can size."""
    if not sys.platform.startswith("linux"):
        return False
    return bool(ctypes.CDLL(None).prctl(78, 2, 0, 0, 0) >= 0)


needs_private_hash = pytest.mark.skipif(
    not private_futex_hash(), reason="the kernel has no per-process futex hash (before Linux 6.16)"
)

PRELUDE = """
import ctypes, json, threading
prctl = ctypes.CDLL(None).prctl
def sleepers(n):
    '''n threads asleep on locks of their own; returns what wakes them all.'''
    locks, threads = [], []
    for _ in range(n):
        lock = threading.Lock()
        lock.acquire()
        thread = threading.Thread(target=lock.acquire, daemon=True)
        thread.start()
        locks.append(lock)
        threads.append(thread)
    def wake():
        for lock in locks:
            lock.release()
        for thread in threads:
            thread.join(30)
        return sum(t.is_alive() for t in threads)
    return wake
"""


def run(body: str) -> dict[str, int]:
    code = PRELUDE + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@needs_private_hash
def test_a_crowd_of_waiting_callers_grows_the_table_and_every_sleeper_still_wakes() -> None:
    out = run(
        """
        from envbuilder.client._admission import Admission
        admission = Admission(1)
        wake = sleepers(8)
        before = prctl(78, 2, 0, 0, 0)
        admission.enter()  # the one permit, held while 600 callers queue behind it
        passed = []
        def caller():
            admission.enter()
            passed.append(1)
            admission.leave()
        callers = [threading.Thread(target=caller) for _ in range(600)]
        for c in callers:
            c.start()
        while admission.waiting < 600:
            threading.Event().wait(0.01)
        # the caller that resizes has queued first, so it may still be at it: up to 10 s
        for _ in range(1000):
            during = prctl(78, 2, 0, 0, 0)
            if during >= 1024:
                break
            threading.Event().wait(0.01)
        admission.leave()
        for c in callers:
            c.join(30)
        print(json.dumps({"before": before, "during": during, "passed": len(passed),
                          "stuck": wake()}))
        """
    )
    assert out["before"] < 600  # the kernel's own size for a handful of threads
    assert out["during"] == 1024  # the next power of two above 600 callers and the rest
    assert out["passed"] == 600  # every caller queued across the resize got its turn
    assert out["stuck"] == 0


@needs_private_hash
def test_a_few_threads_are_left_to_the_kernel() -> None:
    out = run(
        """
        from envbuilder.client import _futex
        wake = sleepers(100)
        before = prctl(78, 2, 0, 0, 0)
        _futex.fit(threading.active_count())
        print(json.dumps({"before": before, "after": prctl(78, 2, 0, 0, 0), "stuck": wake()}))
        """
    )
    assert out["after"] == out["before"]
    assert out["stuck"] == 0


@needs_private_hash
def test_the_table_only_grows_and_a_choice_of_the_shared_table_is_kept() -> None:
    out = run(
        """
        from envbuilder.client import _futex
        wake = sleepers(300)
        prctl(78, 1, 8192, 0, 0)  # the process's own, larger choice
        _futex.fit(threading.active_count())
        larger = prctl(78, 2, 0, 0, 0)
        _futex.fit(5000)  # fewer threads than its choice: kept
        kept = prctl(78, 2, 0, 0, 0)
        _futex.fit(10000)  # more: grown to the next power of two
        grown = prctl(78, 2, 0, 0, 0)
        _futex.fit(1 << 20)  # far more than the cap
        capped = prctl(78, 2, 0, 0, 0)
        print(json.dumps({"larger": larger, "kept": kept, "grown": grown, "capped": capped,
                          "max": _futex.MAX_SLOTS, "stuck": wake()}))
        """
    )
    assert out["larger"] == 8192
    assert out["kept"] == 8192
    assert out["grown"] == 16384
    assert out["capped"] == out["max"]
    assert out["stuck"] == 0
    shared = run(
        """
        from envbuilder.client import _futex
        prctl(78, 1, 0, 0, 0)  # the kernel's shared table, chosen by the process
        wake = sleepers(300)
        _futex.fit(threading.active_count())
        print(json.dumps({"after": prctl(78, 2, 0, 0, 0), "stuck": wake()}))
        """
    )
    assert shared == {"after": 0, "stuck": 0}


def test_a_caller_never_waits_for_another_ones_resize() -> None:
    from envbuilder.client import _futex

    enough = _futex._enough
    with _futex._lock:  # another caller resizing now
        started = threading.Event()

        def caller() -> None:
            _futex.fit(1 << 20)
            started.set()

        thread = threading.Thread(target=caller)
        thread.start()
        assert started.wait(10)  # went on at once, nothing changed
        thread.join()
    assert _futex._enough == enough


@needs_private_hash
def test_a_forked_child_sizes_its_own_table() -> None:
    out = run(
        """
        import os
        from envbuilder.client import _futex
        wake = sleepers(300)
        _futex.fit(threading.active_count())
        parent = prctl(78, 2, 0, 0, 0)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # one thread here: the kernel's table is made with the first one started
            child_wake = sleepers(300)
            before = prctl(78, 2, 0, 0, 0)
            _futex.fit(threading.active_count())
            os.write(write, json.dumps([before, prctl(78, 2, 0, 0, 0), child_wake()]).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        before, after, stuck = json.loads(os.read(read, 1000))
        print(json.dumps({"parent": parent, "child_before": before, "child_after": after,
                          "stuck": stuck + wake()}))
        """
    )
    assert out["parent"] == 512
    assert out["child_before"] < 512  # the kernel's own, for the child's threads
    assert out["child_after"] == 512  # sized again: the parent's resize was not the child's
    assert out["stuck"] == 0
