"""Drive one sandboxed run from the event loop: bounded output, a wall-time limit, a kill.

:func:`run_process` runs an isolation engine's launcher (``bwrap``), never the model's code
itself. Its pipes are read by the event loop as they fill, so nothing waits on a thread and a
run that writes without end is killed as soon as it passes the output limit. :class:`Output`
and :func:`supervise` are the same rules for a run whose output comes another way (a
container's attached stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from asyncio.subprocess import DEVNULL, PIPE
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from envbuilder.isolation.sandbox._result import Limits, RunResult, Status, classify

NICENESS = 10
"""How much a run yields the CPU to the server (its processes inherit it)."""
_CHUNK = 65536
_DRAIN_SECONDS = 5.0


async def run_process(
    argv: Sequence[str],
    limits: Limits,
    *,
    stdin: bytes | int | None = None,
    pass_fds: Sequence[int] = (),
    after_start: Callable[[], None] | None = None,
) -> RunResult:
    """Run ``argv`` and return its result.

    ``stdin`` is bytes to write to it, or a file descriptor to give it. ``after_start`` runs
    once the process exists (to close the parent's copies of descriptors it was given). The
    launcher's environment is only ``PATH``: the server's own never reaches it.
    Raises ``OSError`` when ``argv[0]`` cannot be started.
    """
    started = time.monotonic()
    proc = await _start(argv, stdin, pass_fds)
    if after_start is not None:
        after_start()
    output = Output(limits.output_bytes)

    async def finish() -> None:
        await asyncio.gather(
            _feed(proc, stdin), output.pump(proc.stdout, output.out), output.pump(proc.stderr, output.err)
        )
        await proc.wait()

    async def kill() -> None:
        if proc.returncode is None:
            await asyncio.to_thread(_kill_tree, proc.pid)
        await proc.wait()

    status = await supervise(asyncio.ensure_future(finish()), output, limits.wall_seconds, kill)
    code = proc.returncode if proc.returncode is not None else -1
    # A launcher killed by a signal shows as -N; report it as a shell would, 128 + N.
    return output.result(status, 128 - code if code < 0 else code, started)


async def _start(
    argv: Sequence[str], stdin: bytes | int | None, pass_fds: Sequence[int]
) -> asyncio.subprocess.Process:
    """The launcher, in its own session, with piped output and only ``PATH`` in its environment,
    under ``nice`` (:data:`NICENESS`): code spinning at 100 % must not slow the server's loop."""
    nice = shutil.which("nice")
    launcher = [nice, "-n", str(NICENESS), *argv] if nice else list(argv)
    return await asyncio.create_subprocess_exec(
        *launcher,
        stdin=stdin if isinstance(stdin, int) else DEVNULL if stdin is None else PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        pass_fds=tuple(pass_fds),
        start_new_session=True,  # the server's terminal signals (Ctrl-C) are not the run's
        env={"PATH": os.environ.get("PATH", os.defpath)},
    )


def _kill_tree(pid: int) -> None:
    """SIGKILL the launcher and the children it made. bwrap's child (the PID namespace's init,
    whose death ends every process of the run) asks for a signal on its parent's death only
    once it runs: killing bwrap in that moment left it running, holding the run's pipes. So the
    launcher is stopped first (it then makes no child), and its children are killed with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGSTOP)
    for _ in range(200):  # the stop takes effect when it next runs (a fork in flight ends first)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[-1].split()[0]
        except (OSError, IndexError):
            break
        if state in (b"T", b"t", b"Z", b"X"):
            break
        time.sleep(0.001)
    children: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as f:
                children += [int(c) for c in f.read().split()]
    for target in [*children, pid]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(target, signal.SIGKILL)


class Output:
    """stdout and stderr kept up to one shared byte budget; ``over`` is set once it is passed."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.over = asyncio.Event()
        self.out = bytearray()
        self.err = bytearray()

    def take(self, buf: bytearray, chunk: bytes) -> None:
        """Count ``chunk`` against the budget and keep what fits in ``buf``."""
        buf += chunk[: max(0, self.budget)]
        self.budget -= len(chunk)
        if self.budget < 0:
            self.over.set()  # the run is killed; its output is read on (discarded) to the end

    async def pump(self, stream: asyncio.StreamReader | None, buf: bytearray) -> None:
        assert stream is not None
        while chunk := await stream.read(_CHUNK):
            self.take(buf, chunk)

    def result(self, status: Status | None, exit_code: int, started: float) -> RunResult:
        """The run's result: ``status`` when the run was stopped, else its exit status decides."""
        stderr = self.err.decode("utf-8", "replace")
        return RunResult(
            status=status if status is not None else classify(exit_code, stderr),
            exit_code=None if status is not None else exit_code,
            stdout=self.out.decode("utf-8", "replace"),
            stderr=stderr,
            seconds=time.monotonic() - started,
        )


async def _feed(proc: asyncio.subprocess.Process, stdin: bytes | int | None) -> None:
    """Write ``stdin`` bytes to the process (a run that stops reading is not an error)."""
    if not isinstance(stdin, bytes) or proc.stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(stdin)
        await proc.stdin.drain()
        proc.stdin.close()


async def supervise(
    work: asyncio.Future[Any],
    output: Output,
    wall_seconds: float,
    kill: Callable[[], Awaitable[None]],
) -> Status | None:
    """Wait for ``work`` (the run: its output read to the end) to finish, the output to pass its
    limit, or the wall time to pass; in the last two cases (or when cancelled) ``kill`` the run
    and let ``work`` drain. The status the run was stopped with; None when it ended by itself.
    One rule for every backend: what ends a run, and that a stopped run is always killed."""
    overflow = asyncio.ensure_future(output.over.wait())
    status: Status | None = None
    try:
        done, _ = await asyncio.wait({work, overflow}, timeout=wall_seconds, return_when="FIRST_COMPLETED")
        if overflow in done:
            status = Status.OUTPUT_LIMIT
        elif work not in done:
            status = Status.TIMEOUT
        else:
            work.result()
    finally:
        overflow.cancel()
        if status is not None or work.cancelled() or not work.done():
            await asyncio.shield(kill())
        # Once every process is dead the streams end: let the readers see that and close.
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(work), timeout=_DRAIN_SECONDS)
        work.cancel()
    return status
