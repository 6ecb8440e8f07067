"""Work an agent or a spec controls, run in worker processes that are killed and replaced when
their deadline passes.

A symbolic check (SymPy) on an agent's answer can run for minutes inside one C call that holds
the interpreter lock (``9^{9^{9^{9}}}`` is one big-integer power), and so can a template's
``wordwrap`` over a long row (one regular-expression split): no thread, watchdog or
``wait_for`` can stop it, and while it runs the server answers nothing, not even SIGTERM. So
that work runs here, in separate processes:

- :meth:`ProcessPool.run` (awaited on the event loop) and :meth:`ProcessPool.call` (from a
  worker thread) send a picklable module-level function and its arguments to an idle worker;
  past ``timeout`` the worker is killed (SIGKILL) and a fresh one is started in its place, and
  the caller gets :class:`CheckTimeout`.
- Workers are taken through a fair :class:`~envbuilder.sandbox.Slots` queue keyed by
  :func:`envbuilder.budget.current_party` (the session): one session's expensive work waits
  behind its own, never in front of another session's; each session holds at most one worker
  of a pool at a time.
- A worker dies with the server: it asks the kernel for SIGKILL when the thread that started
  it ends (``PR_SET_PDEATHSIG``; the spawning thread lives as long as the process), and it
  runs under an address-space limit so an answer cannot take the host's memory.

Two pools use this: grading (:func:`grading_pool`, size ``$ENVBUILDER_GRADING_PROCESSES``,
default the cores this process may use, at least 2) and rendering
(``envbuilder.templating``'s templates that do more than show fields).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from envbuilder import budget
from envbuilder.errors import EnvbuilderError
from envbuilder.sandbox._slots import Slots, count_setting

__all__ = [
    "CheckTimeout",
    "ProcessPool",
    "WorkerFailed",
    "confined_pool",
    "grading_pool",
    "run_checked",
    "run_confined",
]

T = TypeVar("T")

PROCESSES_ENV = "ENVBUILDER_GRADING_PROCESSES"
MEMORY_LIMIT = 2 << 30
"""Bytes of address space a worker may map (SymPy on an ordinary answer needs ~150 MB)."""
NICENESS = 10
"""How much a worker yields the CPU to the server (``nice``): it works at full speed on an idle
core, and on a busy one the event loop answering everyone else goes first."""
START_TIMEOUT = 60.0
"""Seconds a new worker may take to start and import what it will run."""
_HEADER = struct.Struct("!I")
log = logging.getLogger("envbuilder.processes")


class CheckTimeout(TimeoutError):
    """The work ran past its deadline; its worker was killed."""


class WorkerFailed(RuntimeError):
    """The worker died or could not be started (out of memory, say); the message says how."""


class _Worker:
    """One worker process and the pipes to it."""

    def __init__(self, proc: subprocess.Popen[bytes]):
        self.proc = proc
        assert proc.stdin is not None and proc.stdout is not None
        self.to = proc.stdin
        self.fd = proc.stdout.fileno()
        self.modules: set[str] = set()

    def send(self, message: Any) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        self.to.write(_HEADER.pack(len(data)) + data)
        self.to.flush()

    def receive(self, until: float, cancelled: threading.Event | None = None) -> Any:
        """The next message, read before the monotonic time ``until`` (else CheckTimeout)."""
        buf = bytearray()
        need = _HEADER.size
        size: int | None = None
        while True:
            while len(buf) < need:
                left = until - time.monotonic()
                if left <= 0 or (cancelled is not None and cancelled.is_set()):
                    raise CheckTimeout
                ready, _, _ = select.select([self.fd], [], [], min(left, 0.25))
                if ready:
                    chunk = os.read(self.fd, max(need - len(buf), 65536))
                    if not chunk:
                        raise WorkerFailed(_death(self.proc))
                    buf += chunk
            if size is None:
                (size,) = _HEADER.unpack_from(buf)
                need = _HEADER.size + size
                continue
            return pickle.loads(bytes(buf[_HEADER.size : need]))

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.wait(5)
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()


def _death(proc: subprocess.Popen[bytes]) -> str:
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(1)
    code = proc.returncode
    if code is not None and code < 0:
        return f"the worker process was killed by signal {-code} (out of memory?)"
    return f"the worker process exited (status {code})"


class _Spawner:
    """Starts worker processes from one long-lived daemon thread, so that their parent-death
    signal fires when this process ends, not when some short-lived thread does."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Future[subprocess.Popen[bytes]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self, memory_limit: int, confined: bool) -> subprocess.Popen[bytes]:
        fut: Future[subprocess.Popen[bytes]] = Future()
        fut.memory_limit = memory_limit  # type: ignore[attr-defined]
        fut.confined = confined  # type: ignore[attr-defined]
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="envbuilder-process-spawner", daemon=True
                )
                self._thread.start()
        self._jobs.put(fut)
        return fut.result()

    def _run(self) -> None:
        while True:
            fut = self._jobs.get()
            try:
                confined: bool = fut.confined  # type: ignore[attr-defined]
                code = f"from envbuilder.processes import serve; serve({fut.memory_limit}, {confined})"  # type: ignore[attr-defined]
                argv = [sys.executable, "-c", code]
                if confined:
                    from envbuilder.sandbox._bwrap import confined_python

                    argv = confined_python(argv)
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # a terminal's Ctrl-C is for the server, which stops us
                    close_fds=True,
                )
            except (OSError, EnvbuilderError) as exc:
                fut.set_exception(WorkerFailed(f"the worker process could not start: {exc}"))
            else:
                fut.set_result(proc)


_SPAWNER = _Spawner()


class ProcessPool:
    """``size`` worker processes, taken fairly by party, each call under a hard deadline."""

    def __init__(self, size: int, *, memory_limit: int = MEMORY_LIMIT, confined: bool = False):
        self.size = size
        self.memory_limit = memory_limit
        self.confined = confined
        """Workers run under bubblewrap (``sandbox.confined_python``): for code an answer steers."""
        self._slots = Slots(size)
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self.killed = 0
        """Workers killed at their deadline since the pool started."""

    async def run(self, fn: Callable[..., T], *args: Any, timeout: float) -> T:
        """``fn(*args)`` in a worker process, its result; ``fn`` must be importable by name.

        Raises:
            CheckTimeout: it ran over ``timeout`` seconds (the worker was killed and replaced).
            WorkerFailed: the worker died (out of memory) or could not start.
            Exception: what ``fn`` raised, re-raised here.
        """
        party = budget.current_party()
        async with self._slots.slot(party):
            cancelled = threading.Event()
            try:
                return await _in_thread(self._call, fn, args, timeout, cancelled)
            except asyncio.CancelledError:
                cancelled.set()  # the worker is killed at its next look, then the slot freed
                raise

    def call(self, fn: Callable[..., T], *args: Any, timeout: float) -> T:
        """:meth:`run` for a thread that may block (a render on a worker thread): waits for its
        turn and for the result in this thread. Raises as :meth:`run` does."""
        with self._slots.hold(budget.current_party()):
            return self._call(fn, args, timeout, None)

    def _take(self) -> _Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        proc = _SPAWNER.start(self.memory_limit, self.confined)
        worker = _Worker(proc)
        with self._lock:
            self._all.add(worker)
        return worker

    def _call(
        self, fn: Callable[..., T], args: tuple[Any, ...], timeout: float, cancelled: threading.Event | None
    ) -> T:
        worker = self._take()
        module = getattr(fn, "__module__", None)
        try:
            if module and module not in worker.modules:
                # Imports are the worker's start-up, not the check's time.
                worker.send(("import", module))
                _reply(worker.receive(time.monotonic() + START_TIMEOUT, cancelled))
                worker.modules.add(module)
            worker.send(("call", fn, args))
            result: T = _reply(worker.receive(time.monotonic() + timeout, cancelled))
        except CheckTimeout:
            self._discard(worker)
            self.killed += 1
            raise
        except (WorkerFailed, OSError, EOFError, pickle.PickleError) as exc:
            self._discard(worker)
            if isinstance(exc, WorkerFailed):
                raise
            raise WorkerFailed(f"the worker process failed: {type(exc).__name__}") from None
        except BaseException:
            with self._lock:
                self._idle.append(worker)  # fn raised: the worker itself is fine
            raise
        with self._lock:
            self._idle.append(worker)
        return result

    def _discard(self, worker: _Worker) -> None:
        with self._lock:
            self._all.discard(worker)
        worker.kill()

    def close(self) -> None:
        """Kill every worker (the pool starts new ones if used again)."""
        with self._lock:
            workers, self._all, self._idle = list(self._all), set(), []
        for worker in workers:
            worker.kill()

    @property
    def processes(self) -> list[int]:
        """The pids of the running workers."""
        with self._lock:
            return [w.proc.pid for w in self._all]


def _reply(message: tuple[str, Any]) -> Any:
    kind, value = message
    if kind == "error":
        raise value
    return value


async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on its own daemon thread (it mostly waits on a pipe, so it does not take
    one of :func:`budget.offload`'s threads from renders)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, exc: BaseException | None) -> None:
        if fut.done():
            return
        if exc is None:
            fut.set_result(result)
        else:
            fut.set_exception(exc)

    def work() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(settle, None, exc)
        else:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=work, name="envbuilder-process-call", daemon=True).start()
    return await fut


def default_size() -> int:
    """``$ENVBUILDER_GRADING_PROCESSES``, else the cores this process may use (at least 2)."""
    return count_setting(PROCESSES_ENV, at_least=2)


_shared: ProcessPool | None = None
_shared_lock = threading.Lock()


def grading_pool() -> ProcessPool:
    """The process-wide pool every grader's CPU-bound work goes through."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = ProcessPool(default_size())
            atexit.register(_shared.close)
        return _shared


async def run_checked(fn: Callable[..., T], *args: Any, timeout: float) -> T:
    """``fn(*args)`` in the grading pool under a hard deadline (see :meth:`ProcessPool.run`)."""
    return await grading_pool().run(fn, *args, timeout=timeout)


_confined: ProcessPool | None = None
_confined_lock = threading.Lock()


def confined_pool() -> ProcessPool:
    """The pool for checkers that evaluate the answer as code (reasoning-gym's ``countdown``
    runs it through SymPy's ``parse_expr``, which is ``eval``): its workers run under bubblewrap
    (no network, no other process, a read-only view of the system and of Python). Where
    bubblewrap is missing or cannot run here (no user namespaces in a container) it is the
    grading pool, with a warning saying why. Blocks for the first check (about 0.3 s)."""
    global _confined
    with _confined_lock:
        if _confined is None:
            why = why_unconfined()
            if why is not None:
                log.warning("checkers that evaluate answers run unconfined: %s", why)
                _confined = grading_pool()
            else:
                _confined = ProcessPool(default_size(), confined=True)
                atexit.register(_confined.close)
        return _confined


def why_unconfined() -> str | None:
    """Why a confined worker cannot start here (None when one can): starts one that imports
    this module and exits."""
    from envbuilder.sandbox._bwrap import confined_python

    try:
        argv = confined_python([sys.executable, "-c", "import envbuilder.processes"])
        done = subprocess.run(argv, capture_output=True, timeout=START_TIMEOUT, check=False)
    except EnvbuilderError as exc:
        return str(exc)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not start ({type(exc).__name__})"
    if done.returncode != 0:
        last = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        return f"bubblewrap exited with status {done.returncode}" + (f": {last[0][:200]}" if last else "")
    return None


async def run_confined(fn: Callable[..., T], *args: Any, timeout: float) -> T:
    """``fn(*args)`` in the :func:`confined_pool` under a hard deadline."""
    pool = _confined if _confined is not None else await asyncio.to_thread(confined_pool)
    return await pool.run(fn, *args, timeout=timeout)


# -- the worker's side ----------------------------------------------------------------------------


def serve(memory_limit: int, confined: bool = False) -> None:
    """A worker's main loop: read a request from stdin, answer on stdout, until stdin closes.
    ``confined``: under bubblewrap, whose own parent-death signal and PID namespace end it."""
    import ctypes
    import importlib
    import resource
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() == 1 and not confined:  # the server was gone before the signal was asked for
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The server's own process comes first on a busy core: a worker kept at 100 % by an answer
    # built to be expensive must not slow every other request (nice 10 is ~1/10 of its weight).
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    # Our answers go on a private copy of stdout; anything a library prints goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    while True:
        header = inp.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        (size,) = _HEADER.unpack(header)
        try:
            message = pickle.loads(inp.read(size))
            if message[0] == "import":
                importlib.import_module(message[1])
                reply: tuple[str, Any] = ("ok", None)
            else:
                _, fn, args = message
                reply = ("ok", fn(*args))
            data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            data = _error(exc)
        out.write(_HEADER.pack(len(data)) + data)
        out.flush()


def _error(exc: Exception) -> bytes:
    try:
        return pickle.dumps(("error", exc), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return pickle.dumps(("error", RuntimeError(f"{type(exc).__name__} in the worker process")))
