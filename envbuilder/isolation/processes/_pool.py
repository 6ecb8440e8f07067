"""The server's side of a pool of worker processes: clean zygotes, one fresh child per call.

:meth:`ProcessPool.run` (awaited on the event loop) and :meth:`ProcessPool.call` (from a thread
that may block) run a registered function (``_registry``) in a fresh child of one of ``size``
zygotes (``_zygote``), under a hard deadline:

- the zygote is taken through a fair :class:`~envbuilder.isolation.sandbox.Slots` queue keyed by
  :func:`envbuilder.deadlines.current_party` (the session): one session's work waits behind its
  own, never in front of another's, and a session holds at most one of a pool's zygotes;
- the call gets a socket pair of its own: the server keeps one end, the child gets the other
  (so a reply can only be about this call, and nothing else can write it), sends the request,
  and reads one reply frame, bounded by the function's ``reply_limit`` and by the deadline;
- whatever happened, the server then tells the zygote to reap the child, and takes the zygote
  back only once it says ``done`` (the child killed and reaped, its sandbox cleared): a zygote
  that dies, stalls or answers out of protocol is killed and replaced, never handed to the
  next call. A zygote found dead when a call starts is replaced for that call (the call does
  not fail).

The reply is read by ``_reply.parse_reply``: a value of the function's return type, or an
error the caller turns into an ungradeable grade (:class:`WorkerFailed`, its subclasses
:class:`WorkerError` and :class:`CodeRefused`, or :class:`CheckTimeout`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import pickle
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from envbuilder import deadlines
from envbuilder.errors import EnvbuilderError
from envbuilder.isolation.processes._frames import (
    CheckTimeout,
    CodeRefused,
    FrameTooLong,
    PeerClosed,
    WorkerError,
    WorkerFailed,
    read_frame,
    send_frame,
)
from envbuilder.isolation.processes._registry import WorkerFunction, registered
from envbuilder.isolation.processes._reply import Reply, parse_reply
from envbuilder.isolation.sandbox._slots import Slots

__all__ = ["MEMORY_LIMIT", "START_TIMEOUT", "ProcessPool", "Step"]

T = TypeVar("T")

MEMORY_LIMIT = 2 << 30
"""Bytes of address space a worker (its zygote, and each child) may map (SymPy on an ordinary
answer needs ~150 MB). A child cannot start another process, so this bounds its whole tree."""
START_TIMEOUT = 60.0
"""Seconds a new zygote may take to start, and a preparation to run (imports, a dataset)."""
REAP_TIMEOUT = 10.0
"""Seconds a zygote may take to reap a child and clear its sandbox before it is killed."""
_CONTROL_REPLY = 4096
#: Thread counts for numerical libraries in a worker: one each (a child may not start threads).
THREAD_VARS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
log = logging.getLogger("envbuilder.isolation.processes")

Step = tuple[Any, ...]
"""A preparation: a worker function and its arguments, run in a zygote before it forks. The
arguments must come from the server (a spec), never from a client: the zygote stays clean."""


class _Declined(Exception):
    """The zygote could not do what it was asked (``{"error": name}``)."""


class _Zygote:
    """One zygote process and the control socket to it."""

    def __init__(self, proc: subprocess.Popen[bytes], control: socket.socket):
        self.proc = proc
        self.control = control
        self.prepared: set[str] = set()

    def send(self, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
        send_frame(self.control, json.dumps(message).encode(), fds)

    def expect(self, key: str, seconds: float) -> Any:
        """The value under ``key`` of the zygote's next message.

        Raises:
            PeerClosed, CheckTimeout, FrameTooLong: it died, stalled or wrote too much.
            _Declined: it could not do what it was asked (``{"error": name}``).
            WorkerFailed: it answered something else.
        """
        data = read_frame(self.control, _CONTROL_REPLY, time.monotonic() + seconds)
        try:
            message = json.loads(data)
        except ValueError:
            raise WorkerFailed("the worker process broke its protocol") from None
        if isinstance(message, dict) and key in message:
            return message[key]
        if isinstance(message, dict) and isinstance(message.get("error"), str):
            raise _Declined(message["error"][:64])
        raise WorkerFailed("the worker process broke its protocol")

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.wait(5)
        with contextlib.suppress(OSError):
            self.control.close()


class _Spawner:
    """Starts worker processes from one long-lived daemon thread, so that their parent-death
    signal fires when this process ends, not when some short-lived thread does."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[subprocess.Popen[bytes]], dict[str, Any]]] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self, **popen: Any) -> subprocess.Popen[bytes]:
        fut: Future[subprocess.Popen[bytes]] = Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="envbuilder-process-spawner", daemon=True
                )
                self._thread.start()
        self._jobs.put((fut, popen))
        return fut.result()

    def _run(self) -> None:
        while True:
            fut, popen = self._jobs.get()
            try:
                proc = subprocess.Popen(
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # a terminal's Ctrl-C is for the server, which stops us
                    close_fds=True,
                    **popen,
                )
            except OSError as exc:
                fut.set_exception(WorkerFailed(f"the worker process could not start: {exc}"))
            else:
                fut.set_result(proc)


_SPAWNER = _Spawner()


class ProcessPool:
    """``size`` zygotes, taken fairly by party; each call in a fresh child under a hard deadline.

    Args:
        size: Zygotes (calls at once).
        memory_limit: Address space of a zygote and of each child.
        confined: Zygotes run under bubblewrap (``sandbox.confined_python``): for work that runs
            what an answer says.
        drop_uid: The uid a child drops to when its zygote runs as root (so that the kernel's
            process limit applies to it); None keeps the zygote's uid.
        clean_env: Start zygotes with a minimal environment, not the server's (a confined one
            always has one).
        alone: A child may start no process and no thread (where an answer may run code);
            otherwise it may start threads (a render's deadline is one), not being able to run
            anything it is sent.
    """

    def __init__(
        self,
        size: int,
        *,
        memory_limit: int = MEMORY_LIMIT,
        confined: bool = False,
        drop_uid: int | None = None,
        clean_env: bool = False,
        alone: bool = False,
    ):
        self.size = size
        self.alone = alone
        self.memory_limit = memory_limit
        self.confined = confined
        self.drop_uid = drop_uid
        self.clean_env = clean_env
        self._slots = Slots(size)
        self._idle: list[_Zygote] = []
        self._all: set[_Zygote] = set()
        self._lock = threading.Lock()
        self.killed = 0
        """Calls killed at their deadline since the pool started."""

    async def run(
        self,
        fn: Callable[..., T],
        *args: Any,
        timeout: float,
        prepare: Sequence[Step] = (),
        reply_limit: int | None = None,
    ) -> T:
        """``fn(*args)`` in a fresh worker process, its result; ``fn`` must be registered with
        ``@worker_function``; each step of ``prepare`` runs first in the zygote (once per
        zygote), with arguments from the server only; ``reply_limit`` overrides the function's
        bound on its reply's bytes.

        Raises:
            CheckTimeout: it ran over ``timeout`` seconds (its process was killed).
            WorkerError: ``fn`` raised (the exception's name only).
            CodeRefused: the input tried to run code and the guard refused it.
            WorkerFailed: the process died (out of memory), could not start, or its reply was
                not a reply.
            TypeError, pickle.PicklingError: an argument cannot be sent to a process.
        """
        entry = registered(fn)
        request = _request(entry, args, timeout)
        steps = _steps(entry, prepare)
        limit = reply_limit or entry.reply_limit
        async with self._slots.slot(deadlines.current_party()):
            cancelled = threading.Event()
            try:
                return await _in_thread(self._call, entry, request, steps, timeout, limit, cancelled)
            except asyncio.CancelledError:
                cancelled.set()  # the child is killed at the next look, then the slot freed
                raise

    def call(
        self,
        fn: Callable[..., T],
        *args: Any,
        timeout: float,
        prepare: Sequence[Step] = (),
        reply_limit: int | None = None,
    ) -> T:
        """:meth:`run` for a thread that may block (a render on a worker thread): waits for its
        turn and for the result in this thread. Raises as :meth:`run` does."""
        entry = registered(fn)
        request = _request(entry, args, timeout)
        steps = _steps(entry, prepare)
        limit = reply_limit or entry.reply_limit
        with self._slots.hold(deadlines.current_party()):
            return self._call(entry, request, steps, timeout, limit, None)

    # -- one call ----------------------------------------------------------------------------

    def _call(
        self,
        entry: WorkerFunction,
        request: bytes,
        steps: list[tuple[str, dict[str, Any]]],
        timeout: float,
        limit: int,
        cancelled: threading.Event | None,
    ) -> Any:
        ours, theirs = socket.socketpair()
        try:
            zygote = self._fork(steps, theirs)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        reply: Reply | None = None
        timed_out = False
        try:
            send_frame(ours, request)
            data = read_frame(ours, limit, time.monotonic() + timeout, cancelled)
            reply = parse_reply(data, entry.schema, limit)
        except CheckTimeout:
            timed_out = True
        except FrameTooLong:
            reply = Reply("unreadable", detail="too long")
        except (PeerClosed, OSError):
            reply = None  # the child died: the zygote's status says how
        finally:
            ours.close()
        status = self._reap(zygote)
        if timed_out:
            self.killed += 1
            raise CheckTimeout
        if reply is None:
            raise WorkerFailed(_death(status))
        if reply.kind == "ok":
            return reply.value
        if reply.kind == "raised":
            raise WorkerError(reply.detail)
        if reply.kind == "refused":
            raise CodeRefused(reply.detail)
        raise WorkerFailed(f"the worker process's reply could not be read ({reply.detail})")

    def _fork(self, steps: list[tuple[str, dict[str, Any]]], theirs: socket.socket) -> _Zygote:
        """A zygote, prepared, that has forked the child for ``theirs``. A zygote taken from the
        idle list and found dead is replaced once; a fresh one that fails is WorkerFailed."""
        for attempt in range(2):
            zygote, fresh = self._take()
            try:
                for key, message in steps:
                    if key not in zygote.prepared:
                        zygote.send(message)
                        try:
                            zygote.expect("ok", START_TIMEOUT)
                        except _Declined as exc:
                            if message["op"] == "import":
                                raise WorkerFailed(
                                    f"the worker process could not import {key[7:]} ({exc})"
                                ) from None
                            # A preparation is only a head start: the child does the work itself
                            # (and says what fails in its own reply).
                            log.debug("preparing %s failed in a worker: %s", key, exc)
                        zygote.prepared.add(key)
                zygote.send({"op": "fork"}, (theirs.fileno(),))
                zygote.expect("forked", START_TIMEOUT)
                return zygote
            except (OSError, PeerClosed, CheckTimeout, FrameTooLong, WorkerFailed, _Declined) as exc:
                self._discard(zygote)
                if fresh or attempt:
                    if isinstance(exc, WorkerFailed):
                        raise
                    raise WorkerFailed(f"the worker process failed to start the work: {_name(exc)}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _reap(self, zygote: _Zygote) -> dict[str, Any] | None:
        """Have the zygote kill and reap the child; back to idle once it says ``done``. The
        child's status, or None when the zygote did not answer (it is killed)."""
        try:
            zygote.send({"op": "reap"})
            status = zygote.expect("done", REAP_TIMEOUT)
            if not isinstance(status, dict):
                raise WorkerFailed("the worker process broke its protocol")
        except (OSError, PeerClosed, CheckTimeout, FrameTooLong, WorkerFailed, _Declined):
            self._discard(zygote)
            return None
        with self._lock:
            if zygote in self._all:
                self._idle.append(zygote)
        return status

    # -- zygotes -----------------------------------------------------------------------------

    def _take(self) -> tuple[_Zygote, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), False
        zygote = self._start()
        with self._lock:
            self._all.add(zygote)
        return zygote, True

    def _start(self) -> _Zygote:
        ours, theirs = socket.socketpair()
        try:
            fd = theirs.fileno()
            flags = ["-P"] if self.confined else []  # a confined one never imports from its cwd
            code = (
                "from envbuilder.isolation.processes._zygote import main; "
                f"main({fd}, {self.memory_limit}, {self.confined}, {self.drop_uid}, {os.getpid()}, "
                f"{self.alone})"
            )
            argv = [sys.executable, *flags, "-c", code]
            env = {**os.environ, **THREAD_VARS}
            if self.confined:
                from envbuilder.isolation.sandbox._bwrap import confined_python

                try:
                    argv = confined_python(argv)
                except EnvbuilderError as exc:
                    raise WorkerFailed(f"the worker process could not start: {exc}") from None
            elif self.clean_env:
                from envbuilder.isolation.sandbox._backend import BASE_ENV

                env = {**BASE_ENV, **THREAD_VARS}
                if os.environ.get("PYTHONPATH"):
                    env["PYTHONPATH"] = os.environ["PYTHONPATH"]
            proc = _SPAWNER.start(args=argv, env=env, pass_fds=(fd,))
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        zygote = _Zygote(proc, ours)
        try:
            zygote.expect("ready", START_TIMEOUT)
        except (PeerClosed, CheckTimeout, FrameTooLong, WorkerFailed, _Declined, OSError) as exc:
            status = None
            if isinstance(exc, PeerClosed):  # it closed its end: read how it ended before any kill
                with contextlib.suppress(subprocess.TimeoutExpired):
                    status = proc.wait(2)
            zygote.kill()
            if status is None:
                why = _name(exc)
            else:
                why = _death({"signal": -status} if status < 0 else {"exit": status})
            raise WorkerFailed(f"the worker process could not start ({why})") from None
        return zygote

    def _discard(self, zygote: _Zygote) -> None:
        with self._lock:
            self._all.discard(zygote)
            if zygote in self._idle:
                self._idle.remove(zygote)
        zygote.kill()

    def close(self) -> None:
        """Kill every zygote and its children (the pool starts new ones if used again)."""
        with self._lock:
            zygotes, self._all, self._idle = list(self._all), set(), []
        for zygote in zygotes:
            zygote.kill()

    @property
    def processes(self) -> list[int]:
        """The pids of the running zygotes (for a confined pool, their bubblewrap)."""
        with self._lock:
            return [z.proc.pid for z in self._all]


def _request(entry: WorkerFunction, args: tuple[Any, ...], timeout: float) -> bytes:
    """The pickled request (the server writes it; only the child reads it, before it runs
    anything of the input). Raises TypeError or PicklingError for an argument that cannot go."""
    return pickle.dumps((entry.name, args, timeout), protocol=pickle.HIGHEST_PROTOCOL)


def _steps(entry: WorkerFunction, prepare: Sequence[Step]) -> list[tuple[str, dict[str, Any]]]:
    """The control messages that make a zygote ready for ``entry``: its module and each
    preparation's module imported, then each preparation run (keyed, so each runs once)."""
    out: list[tuple[str, dict[str, Any]]] = []
    prepared = [(registered(step[0]), list(step[1:])) for step in prepare]
    for module in dict.fromkeys([entry.module, *(p.module for p, _ in prepared)]):
        out.append((f"import {module}", {"op": "import", "module": module}))
    for step, args in prepared:
        message = {"op": "prepare", "name": step.name, "args": args}
        out.append((json.dumps(message, sort_keys=True), message))
    return out


def _death(status: dict[str, Any] | None) -> str:
    code = status.get("signal") if status else None
    if isinstance(code, int):
        return f"the worker process was killed by signal {code} (out of memory?)"
    code = status.get("exit") if status else None
    if isinstance(code, int):
        return f"the worker process exited (status {code})"
    return "the worker process died"


def _name(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, WorkerFailed) else type(exc).__name__


async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on its own daemon thread (it mostly waits on a socket, so it does not take
    one of :func:`deadlines.offload`'s threads from renders)."""
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
