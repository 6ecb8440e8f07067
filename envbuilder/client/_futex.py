"""The process's futex hash grown to its number of threads (Linux 6.16 and later).

Every lock a Python thread sleeps on, and the interpreter lock each thread hands on, is a futex.
Since Linux 6.16 a process's private futexes hash into a table of its own, which the kernel
sizes at four slots per thread up to the number of online CPUs and at least 16: 16 slots on a
two-core machine, however many threads the process has. Each futex wake-up walks its slot's
chain of sleepers, so with N threads asleep (a thread per request in flight, most of them
waiting their turn) every lock handed on costs in proportion to N/16. Measured on this
project's two-core machine (kernel 6.18, ``bench/futex_hash.py``: one lock handed back and
forth between two threads while N others sleep on locks of their own): 8.5 µs per round trip
with none asleep, 47 µs with 4,000, 201 µs with 16,000; 8.5 and 17 µs with 4,000 and 16,000 once
the table had 4,096 and 16,384 slots (``bench/README.md``, clients.py, fifth round).

:func:`fit` grows the table to the next power of two at or above the process's thread count
(``prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, n)``); the kernel moves the sleepers into it
(10-35 ms with 1,000-16,000 asleep). It only ever grows a private table, up to
:data:`MAX_SLOTS` (64 bytes a slot: 4 MB at most); a process that chose the shared table (0
slots) or a larger one keeps it; elsewhere (other systems, older kernels) it does nothing, once.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

__all__ = ["MAX_SLOTS", "fit"]

PR_FUTEX_HASH = 78
PR_FUTEX_HASH_SET_SLOTS = 1
PR_FUTEX_HASH_GET_SLOTS = 2

#: The most slots :func:`fit` asks for.
MAX_SLOTS = 1 << 16
#: Fewer threads than this are left to the kernel's own sizing (16 per slot at most).
MIN_THREADS = 256

_lock = threading.Lock()  # only ever tried, never waited for: a crowd must not queue on it
_enough = MIN_THREADS  # thread counts up to this need nothing done


def _forget() -> None:
    """In a forked child: a process of its own, whose table the kernel makes anew."""
    global _lock, _enough
    _lock, _enough = threading.Lock(), MIN_THREADS


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def _libc_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # here, not at import: only a process with hundreds of threads gets this far

    try:
        return getattr(ctypes.CDLL(None), "prctl", None)
    except OSError:  # a C library ctypes cannot open
        return None


def fit(threads: int) -> None:
    """Grow the process's futex hash to at least ``threads`` slots, or the process's thread
    count if more (a power of two; the count is only read when a resize is due).

    Never waits for another caller: the first one past a doubling resizes (the kernel moves
    the sleepers, ~20 ms with 16,000 threads in a crowd; the interpreter lock is not held
    meanwhile), and the others, and those that come while it does, go on at once."""
    global _enough
    if threads <= _enough or not _lock.acquire(blocking=False):
        return
    try:
        if threads > _enough:
            _enough = sys.maxsize  # until the resize ends: no one else starts one
            _resize(max(threads, threading.active_count()))
    finally:
        _lock.release()


def _resize(threads: int) -> None:
    global _enough
    enough = sys.maxsize  # unless the table is ours to grow and grew: never asked again
    try:
        prctl = _libc_prctl()
        if prctl is None:
            return
        want = min(MAX_SLOTS, 1 << (threads - 1).bit_length())
        have = prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS, 0, 0, 0)
        # -1: no such prctl here (before Linux 6.16); 0: the process uses the kernel's shared
        # table, by its own choice or the kernel's. Neither is ours to change.
        if have <= 0:
            return
        if have < want and prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, want, 0, 0) != 0:
            return  # refused (memory, a kernel that forbids it)
        if want < MAX_SLOTS:
            enough = max(want, have)
    finally:
        _enough = enough
