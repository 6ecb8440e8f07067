"""Drive one sandbox process from the event loop: bounded output, a wall-time limit, a kill.

The process is an isolation engine's launcher (``bwrap``, ``docker run``), never the model's
code itself. Its pipes are read by the event loop as they fill, so nothing waits on a thread
and a run that writes without end is killed as soon as it passes the output limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from asyncio.subprocess import DEVNULL, PIPE
from collections.abc import Awaitable, Callable, Sequence

from envbuilder.sandbox._result import Limits, RunResult, Status, classify

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
    on_kill: Callable[[], Awaitable[None]] | None = None,
    after_start: Callable[[], None] | None = None,
    env: dict[str, str] | None = None,
) -> tuple[RunResult, int]:
    """Run ``argv``; return its result and the launcher's own exit status.

    ``stdin`` is bytes to write to it, or a file descriptor to give it. ``on_kill`` runs
    after the launcher is killed (a container engine must be told to stop the container:
    killing its client does not); ``after_start`` once the process exists (to close the
    parent's copies of descriptors it was given). ``env`` is the launcher's whole
    environment (default: only ``PATH``): the server's own never reaches it.
    Raises ``OSError`` when ``argv[0]`` cannot be started.
    """
    started = time.monotonic()
    proc = await _start(argv, stdin, pass_fds, env)
    if after_start is not None:
        after_start()
    output = _Output(limits.output_bytes)
    status = await _supervise(proc, output, stdin, limits.wall_seconds, on_kill)
    return _result(proc, output, status, started)


async def _start(
    argv: Sequence[str], stdin: bytes | int | None, pass_fds: Sequence[int], env: dict[str, str] | None
) -> asyncio.subprocess.Process:
    """The launcher, in its own session, with piped output and only the given environment,
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
        env=env if env is not None else {"PATH": os.environ.get("PATH", os.defpath)},
    )


class _Output:
    """stdout and stderr kept up to one shared byte budget; ``over`` is set once it is passed."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.over = asyncio.Event()
        self.out = bytearray()
        self.err = bytearray()

    async def pump(self, stream: asyncio.StreamReader | None, buf: bytearray) -> None:
        assert stream is not None
        while chunk := await stream.read(_CHUNK):
            buf += chunk[: max(0, self.budget)]
            self.budget -= len(chunk)
            if self.budget < 0:
                self.over.set()  # the run is killed; read on (discarding) to the pipe's end


async def _feed(proc: asyncio.subprocess.Process, stdin: bytes | int | None) -> None:
    """Write ``stdin`` bytes to the process (a run that stops reading is not an error)."""
    if not isinstance(stdin, bytes) or proc.stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(stdin)
        await proc.stdin.drain()
        proc.stdin.close()


async def _supervise(
    proc: asyncio.subprocess.Process,
    output: _Output,
    stdin: bytes | int | None,
    wall_seconds: float,
    on_kill: Callable[[], Awaitable[None]] | None,
) -> Status | None:
    """Wait for the run to end, pass its output limit, or pass its wall time; kill it in the
    last two cases (or when cancelled). None when it ended by itself."""

    async def finish() -> None:
        await asyncio.gather(
            _feed(proc, stdin), output.pump(proc.stdout, output.out), output.pump(proc.stderr, output.err)
        )
        await proc.wait()

    work = asyncio.ensure_future(finish())
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
            await _kill(proc, on_kill)
        # Once every process is dead the pipes end: let the readers see that and close.
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(work), timeout=_DRAIN_SECONDS)
        work.cancel()
    return status


def _result(
    proc: asyncio.subprocess.Process, output: _Output, status: Status | None, started: float
) -> tuple[RunResult, int]:
    """The run's result, and the launcher's exit status as a shell reports it."""
    code = proc.returncode if proc.returncode is not None else -1
    # A launcher killed by a signal shows as -N; report it as a shell would, 128 + N.
    shown = 128 - code if code < 0 else code
    stderr = output.err.decode("utf-8", "replace")
    result = RunResult(
        status=status if status is not None else classify(shown, stderr),
        exit_code=None if status is not None else shown,
        stdout=output.out.decode("utf-8", "replace"),
        stderr=stderr,
        seconds=time.monotonic() - started,
    )
    return result, shown


async def _kill(proc: asyncio.subprocess.Process, on_kill: Callable[[], Awaitable[None]] | None) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    if on_kill is not None:
        await asyncio.shield(on_kill())
    await asyncio.shield(proc.wait())
