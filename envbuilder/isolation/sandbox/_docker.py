"""The container backend: the same contract on a Docker (or Podman) engine, through its API.

Each run is a fresh container of the sandbox image (``ENVBUILDER_SANDBOX_IMAGE``, default the
one ``envbuilder sandbox build-image`` builds: Debian minbase and Python) on the engine
``DOCKER_HOST`` names (:mod:`._engine`): no network, a read-only root, size-limited tmpfs
``/work`` and ``/tmp``, every capability dropped but the three its set-up needs, no new
privileges, a memory cgroup (``memory_mb`` plus the two tmpfs, which are memory), a PID limit,
no logs kept by the engine, removed by the engine when it ends.

Inside, a small ``sh`` set-up (:data:`BOOTSTRAP`) runs as root with only ``SETUID``, ``SETGID``
and ``KILL`` and is the container's PID 1:

1. it unpacks the run's files (a tar on the container's stdin; with a kept folder, the folder
   first) into ``/work`` as the run's user (uid 65534), and writes ``<nonce>:ready`` on stdout
   and on stderr: what fails before that is the engine's or the image's fault, never the code's;
2. it runs the command as uid 65534 with an empty environment (:data:`BASE_ENV` only), stdin
   from ``/dev/null``, under ``nice`` and ``prlimit`` (CPU time, address space, file size, open
   files, no core dumps: the same rlimits as bubblewrap), its stdout and stderr the container's;
3. when the command ends it kills every process left (``kill -9 -1`` as root, repeated until
   none is left), reads the cgroup's OOM-kill count, and writes ``<nonce>:end <status> <oom>``
   on both streams (the engine keeps each one in order, not one against the other); with a
   kept folder, a tar of ``/work`` follows on stdout (made as uid 65534), then ``<nonce>:done``.
   The server stops reading once it has them: the engine's teardown of the container is not
   the run's.

The nonce is in PID 1's environment only (root's, which uid 65534 cannot read) and the end
line is written once no process of the code is left, so the code can neither fake the end of
its run (and pass its own output off as the kept folder) nor see the tar. The server counts the
code's output against ``output_kb`` as it comes, kills the container at ``wall_seconds`` after
``ready`` (the engine's start-up is not the code's time), and removes it whatever happens. In
the container, ``timeout`` stops the code 30 s after its wall time, so a container whose server
died still ends (and the engine removes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import secrets
import shlex
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from envbuilder.errors import SandboxError
from envbuilder.isolation.sandbox._backend import BASE_ENV, Backend
from envbuilder.isolation.sandbox._engine import ENGINE_ENV, STDERR, STDOUT, Engine, EngineAddress, RawStream
from envbuilder.isolation.sandbox._images import default_image
from envbuilder.isolation.sandbox._process import NICENESS, Output, supervise
from envbuilder.isolation.sandbox._result import Limits, RunResult, Status
from envbuilder.isolation.sandbox._workdir import pack, restore

IMAGE_ENV = "ENVBUILDER_SANDBOX_IMAGE"
#: What every run container carries (``docker ps --filter label=envbuilder.isolation.sandbox``), and
#: which process made it (a server's reaper, or a test, can tell its own).
LABEL = "envbuilder.isolation.sandbox"
OWNER_LABEL = "envbuilder.owner"
_owners: dict[int, str] = {}


def owner() -> str:
    """This process's ``envbuilder.owner`` label: host, pid and a random part (pids recur)."""
    pid = os.getpid()
    return _owners.setdefault(pid, f"{socket.gethostname()}:{pid}:{secrets.token_hex(4)}")


_NOBODY = 65534
_OPEN_FILES = 256
#: RLIMIT_NPROC counts a uid's processes across the engine's host (no user namespace): a
#: ceiling for uid 65534 there, not a run's bound (the cgroup's PID limit is that).
_USER_PROCESSES = 4096
_START_SECONDS = 60.0  # create, start and unpack; an engine slower than this is broken
_GRACE_SECONDS = 30  # the in-container deadline past wall_seconds (for a server that died)
_MB = 1024 * 1024

BOOTSTRAP = """\
n=$ENVBUILDER_RUN; unset ENVBUILDER_RUN
cd /work || exit 1
setpriv --reuid={uid} --regid={uid} --clear-groups env -i PATH="$PATH" tar -x -f - -C /work || {{
  echo "envbuilder: the run's files could not be unpacked into /work" >&2; exit 1; }}
command -v "$1" >/dev/null || {{
  echo "envbuilder: the command '$1' is not in the image ($PATH)" >&2; exit 1; }}
printf '\\n%s:ready\\n' "$n"; printf '\\n%s:ready\\n' "$n" >&2
timeout -s KILL {deadline} setpriv --reuid={uid} --regid={uid} --clear-groups env -i {env} \\
  prlimit {rlimits} -- nice -n {nice} "$@" </dev/null
rc=$?
i=0
while [ $i -lt 100 ] && kill -9 -1 2>/dev/null; do i=$((i + 1)); done
oom=0
for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
  if [ -r "$f" ]; then while read -r k v; do [ "$k" = oom_kill ] && oom=$v; done <"$f"; fi
done
printf '\\n%s:end %s %s\\n' "$n" "$rc" "$oom"; printf '\\n%s:end %s %s\\n' "$n" "$rc" "$oom" >&2
{keep}
exit "$rc"
"""
_KEEP = (
    'setpriv --reuid={uid} --regid={uid} --clear-groups env -i PATH="$PATH" tar -C /work -cf - . 2>/dev/null'
    "\n"
    "printf '\\n%s:done\\n' \"$n\""
)


class DockerBackend(Backend):
    """Runs each command in a fresh, locked-down container on a Docker or Podman engine."""

    name = "docker"
    #: The variables a backend reads when it is made (``default_backend`` keys on them).
    ENV: ClassVar[tuple[str, ...]] = (*ENGINE_ENV, IMAGE_ENV)

    def __init__(self, *, host: str | None = None, image: str | None = None, uid: int = _NOBODY):
        self.address = EngineAddress.from_env(host)
        self.engine = Engine(self.address)
        self.image = image or os.environ.get(IMAGE_ENV) or default_image()
        self.uid = uid

    def describe(self) -> str:
        return f"docker ({self.image} on {self.address}; no network, read-only root, as uid {self.uid})"

    def container(self, command: Sequence[str], limits: Limits, nonce: str, *, keep: bool) -> dict[str, Any]:
        """The engine's container configuration for one run (``keep``: send ``/work`` back)."""
        disk = limits.disk_mb * _MB
        script = BOOTSTRAP.format(
            uid=self.uid,
            deadline=int(limits.wall_seconds) + _GRACE_SECONDS,
            env=" ".join(shlex.quote(f"{k}={v}") for k, v in {**BASE_ENV, "PWD": "/work"}.items()),
            rlimits=" ".join(
                (
                    f"--cpu={limits.cpu_rlimit}:{limits.cpu_rlimit + 1}",
                    f"--as={limits.memory_mb * _MB}",
                    f"--fsize={disk}",
                    f"--nofile={_OPEN_FILES}",
                    "--core=0",
                )
            ),
            nice=NICENESS,
            keep=_KEEP.format(uid=self.uid) if keep else "",
        )
        memory = (limits.memory_mb + 2 * limits.disk_mb + 64) * _MB
        tmpfs = f"rw,exec,nosuid,nodev,size={disk},mode=1777"
        return {
            "Image": self.image,
            "Entrypoint": ["/bin/sh", "-c"],
            "Cmd": [script, "sh", *command],
            "Env": [f"ENVBUILDER_RUN={nonce}", f"PATH={BASE_ENV['PATH']}"],
            "User": "0:0",
            "WorkingDir": "/",
            "Hostname": "sandbox",
            "Labels": {LABEL: "run", OWNER_LABEL: owner()},
            "AttachStdin": True,
            "AttachStdout": True,
            "AttachStderr": True,
            "OpenStdin": True,
            "StdinOnce": True,
            "Tty": False,
            "NetworkDisabled": True,
            "HostConfig": {
                "AutoRemove": True,
                "NetworkMode": "none",
                "ReadonlyRootfs": True,
                "Tmpfs": {"/work": tmpfs, "/tmp": tmpfs},
                "ShmSize": _MB,
                "CapDrop": ["ALL"],
                "CapAdd": ["SETUID", "SETGID", "KILL"],
                "SecurityOpt": ["no-new-privileges"],
                "Memory": memory,
                "MemorySwap": memory,
                "PidsLimit": limits.processes + 2,  # the set-up's shell and `timeout`
                # Given, not left to the engine: rootful Podman raises both to 1048576, which
                # fails where root lacks CAP_SYS_RESOURCE (some VMs and CI containers).
                "Ulimits": [
                    {"Name": "nofile", "Soft": _OPEN_FILES, "Hard": _OPEN_FILES},
                    {"Name": "nproc", "Soft": _USER_PROCESSES, "Hard": _USER_PROCESSES},
                ],
                "LogConfig": {"Type": "none", "Config": {}},
            },
        }

    async def _run(
        self, command: Sequence[str], files: Mapping[str, bytes], limits: Limits, workdir: Path | None
    ) -> RunResult:
        keep = workdir is not None
        disk = limits.disk_mb * _MB
        payload = await asyncio.to_thread(pack, workdir, files, uid=self.uid, limit=disk)
        nonce = secrets.token_hex(16)
        started = time.monotonic()
        output = Output(limits.output_bytes)
        run = _Stream(nonce, output, keep=keep, cap=disk + _MB)
        async with self.engine.connect() as api:
            container: str | None = None
            work: asyncio.Future[None] | None = None
            ended = False
            try:
                async with asyncio.timeout(_START_SECONDS):
                    container = await api.create(self.container(command, limits, nonce, keep=keep))
                async with api.attach(container) as stream:
                    async with asyncio.timeout(_START_SECONDS):
                        await api.start(container)
                        work = asyncio.ensure_future(run.pump(stream, payload))
                        await _until_ready(run, work)
                    status = await supervise(work, output, limits.wall_seconds, lambda: api.kill(container))
                ended = status is None and run.end is not None
            except TimeoutError:
                raise SandboxError(
                    f"the container engine at {self.address} did not start the run within "
                    f"{_START_SECONDS:.0f} s"
                ) from None
            finally:
                if container is not None and not ended:
                    with contextlib.suppress(SandboxError):
                        await asyncio.shield(api.remove(container))
                if work is not None and not work.done():
                    work.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await work
        if status is None and run.end is None:
            raise SandboxError(
                "the run's container ended before the run did (the engine stopped it)",
                hint="Check the engine's log",
            )
        if keep and workdir is not None and ended and run.end is not None:
            await asyncio.to_thread(restore, workdir, bytes(run.trailer), disk)
        result = output.result(status, run.end[0] if run.end else -1, started)
        if status is None and run.end is not None and run.end[1]:
            # The cgroup's OOM killer ended a process: the whole run ran out of memory.
            failed = Status.MEMORY if not result.ok else result.status
            return dataclasses.replace(result, status=failed, oom_killed=True)
        return result


async def _until_ready(run: _Stream, work: asyncio.Future[None]) -> None:
    """Wait until the set-up says the code starts; its own failure is a SandboxError."""
    waiter: asyncio.Future[Any] = asyncio.ensure_future(run.ready.wait())
    try:
        await asyncio.wait([waiter, work], return_when="FIRST_COMPLETED")
    finally:
        waiter.cancel()
    if not run.ready.is_set():
        said = " / ".join(run.setup_err.decode("utf-8", "replace").split("\n")).strip(" /")
        raise SandboxError(
            f"the sandbox image could not start the run: {said[-500:] or 'it said nothing'}",
            hint="The image needs sh, tar, timeout, env, nice, setpriv and prlimit (coreutils, "
            "util-linux) and the run's command",
        )


class _Channel:
    """One of a container's two streams: the set-up's bytes until its ready line, the code's
    output (counted against the budget, into ``buf``) until the end line, then what follows."""

    def __init__(self, nonce: str, output: Output, buf: bytearray):
        self._ready_line = f"\n{nonce}:ready\n".encode()
        self._end_mark = f"\n{nonce}:end ".encode()
        self._output, self._buf = output, buf
        self.setup = bytearray(b"\n")  # (a newline first: the ready line may be the first bytes)
        self.ready = False
        self._pending = bytearray()  # the code's, unless an end line starts in it
        self.end: list[bytes] | None = None  # the end line's fields

    def feed(self, data: bytes) -> bytes:
        """Take the stream's next bytes; once the end line has passed, what follows it."""
        if not self.ready:
            self.setup += data
            at = self.setup.find(self._ready_line)
            if at < 0:
                del self.setup[4096:]  # the set-up's own words, for an error (bounded)
                return b""
            data = bytes(self.setup[at + len(self._ready_line) :])
            del self.setup[at:]
            self.ready = True
        if self.end is not None:
            return data
        pending = self._pending
        pending += data
        at = pending.find(self._end_mark)
        if at < 0:
            keep = len(self._end_mark) - 1  # an end line may be starting at the end
            if len(pending) > keep:
                self._output.take(self._buf, bytes(pending[:-keep]))
                del pending[:-keep]
            return b""
        line_end = pending.find(b"\n", at + len(self._end_mark))
        self._output.take(self._buf, bytes(pending[:at]))
        del pending[:at]
        if line_end < 0:
            return b""
        line_end -= at
        self.end = bytes(pending[len(self._end_mark) : line_end]).split()
        rest = bytes(pending[line_end + 1 :])
        pending.clear()
        return rest

    def flush(self) -> None:
        """The run was stopped before its end line: what is pending was the code's."""
        if self.ready and self.end is None:
            self._output.take(self._buf, bytes(self._pending))
            self._pending.clear()


class _Stream:
    """Reads a run's attached stream: stdout and stderr each carry the set-up's ready line,
    the code's output (against the budget) and the set-up's end line (the engine keeps each
    stream in order, not one against the other); after stdout's end line, the kept folder's
    tar (up to ``cap`` bytes) and the done line. Reading stops once both end lines (and the
    done line) are in: the code's processes are gone by then, and the engine's teardown of the
    container is no part of the run's time."""

    def __init__(self, nonce: str, output: Output, *, keep: bool, cap: int):
        self.output = output
        self.ready = asyncio.Event()  # the code started (stdout's ready line)
        self._out = _Channel(nonce, output, output.out)
        self._err = _Channel(nonce, output, output.err)
        self._done_mark = f"\n{nonce}:done\n".encode()
        self._keep = keep
        self._cap = cap
        self._tail = b""
        self._done = not keep
        self.trailer = bytearray()
        self.end: tuple[int, int] | None = None  # (exit status, OOM kills), from stdout's end line

    @property
    def complete(self) -> bool:
        return self.end is not None and self._err.end is not None and self._done

    @property
    def setup_err(self) -> bytes:
        return bytes(self._err.setup)

    async def pump(self, stream: RawStream, payload: bytes) -> None:
        writer = asyncio.ensure_future(stream.write(payload))
        try:
            async for kind, data in stream.frames():
                if kind == STDOUT:
                    rest = self._out.feed(data)
                    if self._out.ready:
                        self.ready.set()
                    if self._out.end is not None:
                        if self.end is None:
                            fields = self._out.end
                            oom = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
                            self.end = (int(fields[0]), oom)
                        if self._keep:
                            self._trail(rest)
                elif kind == STDERR:
                    self._err.feed(data)
                if self.complete:
                    break
        finally:
            writer.cancel()
        self._out.flush()
        self._err.flush()

    def _trail(self, data: bytes) -> None:
        """The kept folder's tar, then the done line (the last bytes of stdout)."""
        if len(self.trailer) <= self._cap:
            self.trailer += data
        self._tail = (self._tail + data)[-len(self._done_mark) :]
        if self._tail == self._done_mark:
            self._done = True
            if self.trailer.endswith(self._done_mark):
                del self.trailer[-len(self._done_mark) :]
