"""Work an answer, a client or a spec controls, run in worker processes that never serve two calls.

A symbolic check (SymPy) on an agent's answer can run for minutes inside one C call that holds
the interpreter lock (``9^{9^{9^{9}}}`` is one big-integer power), and so can a template's
``wordwrap`` over a long row; some checkers run the answer itself (SymPy's ``parse_expr`` is
``eval``). So that work runs in separate processes, under these rules:

- **A registry, not pickled callables** (``_registry``): a call names a function registered
  with :func:`worker_function`, whose return annotation is the schema of its reply.
- **One fresh process per call** (``_zygote``, ``_pool``): each pool keeps clean zygotes that
  never see a call's input; every call runs in a new child forked for it, with a socket of its
  own, and is killed after its one reply. What an answer does to its process (a replaced
  scoring function, a cache) dies with it; a process that exits or misbehaves is never handed
  to the next call.
- **Replies are data** (``_reply``): one length-bounded JSON object validated strictly against
  the function's return type; anything else makes that call fail (the answer ungradeable),
  nothing more. Only the server writes requests, so they are pickled (task rows carry Python
  values); nothing a worker writes is ever unpickled.
- **Limits** (``_zygote``): a child that evaluates answers cannot start a process or a thread
  (``RLIMIT_NPROC`` 1, enforced by the kernel for any uid but root's, so a root zygote's child
  drops to an unprivileged uid), so its address space (:data:`MEMORY_LIMIT`) bounds its whole
  tree; every child writes files of at most 16 MiB, holds 64 descriptors, has a CPU-time limit
  just past its deadline, and is killed (``SIGKILL``) at the deadline. Children of the pools
  that only read answers as data (math, regex, renders) may start threads (a render's deadline
  is one): nothing they are sent can run.
- **Confinement** (``_pools``): checkers that evaluate answers run under bubblewrap and arm a
  guard (``_guard``) that refuses the answer's attempts to run code; without a working sandbox
  they refuse unless the operator allowed it (:func:`allow_unconfined`).

Process limits, why these: cgroups would bound a tree's memory exactly, but need a delegated,
writable cgroup, which a container or a CI runner seldom has (the development machine has
cgroup v1 with nothing delegated; a container's ``/sys/fs/cgroup`` is read-only). A watchdog
summing the tree's memory from ``/proc`` costs the server a scan of every process per tick
(25 ms on that machine, where ``/proc/PID/task/*/children`` is not compiled in). ``RLIMIT_NPROC``
is always there and is enforced by the kernel for any uid but root's (counted per user
namespace since Linux 5.14): at 1, a child can start no process and no thread, however many the
user already runs, so its address-space limit is the limit of its whole tree, and a fork bomb
stops at its first fork. A seccomp filter would need a BPF program per architecture; the guard
and the confinement make it moot. What a child could still hold outside its address space
(files in the sandbox's 16 MiB ``/tmp`` and ``/dev/shm``, at most 64 descriptors of 16 MiB
memory files, pipe and socket buffers) is bounded by those limits and freed with its sandbox.
"""

from envbuilder.isolation.processes._frames import CheckTimeout, CodeRefused, WorkerError, WorkerFailed
from envbuilder.isolation.processes._guard import guarded
from envbuilder.isolation.processes._pool import MEMORY_LIMIT, START_TIMEOUT, ProcessPool
from envbuilder.isolation.processes._pools import (
    ALLOW_UNCONFINED_ENV,
    PROCESSES_ENV,
    Confinement,
    allow_unconfined,
    confined_pool,
    confinement,
    default_size,
    grading_pool,
    require_confinement,
    run_checked,
    run_confined,
    serving_confinement,
    why_unconfined,
)
from envbuilder.isolation.processes._registry import worker_function
from envbuilder.isolation.processes._zygote import NICENESS

__all__ = [
    "ALLOW_UNCONFINED_ENV",
    "MEMORY_LIMIT",
    "NICENESS",
    "PROCESSES_ENV",
    "START_TIMEOUT",
    "CheckTimeout",
    "CodeRefused",
    "Confinement",
    "ProcessPool",
    "WorkerError",
    "WorkerFailed",
    "allow_unconfined",
    "confined_pool",
    "confinement",
    "default_size",
    "grading_pool",
    "guarded",
    "require_confinement",
    "run_checked",
    "run_confined",
    "serving_confinement",
    "why_unconfined",
    "worker_function",
]
