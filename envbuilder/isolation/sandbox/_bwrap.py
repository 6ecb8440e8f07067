"""The default sandbox backend: bubblewrap (``bwrap``, Debian/Ubuntu/Fedora package ``bubblewrap``).

What a run sees and may do:

- a read-only view of the system's programs and libraries (``/usr``, ``/bin``, ``/lib*``, and of
  ``/etc`` only the dynamic linker's files, ``alternatives`` and ``localtime``) and nothing else
  of the host: no home folders, no server files, no host users (``/etc/passwd``, ``group``,
  ``hosts`` and ``nsswitch.conf`` are the sandbox's own: root, the run's user, nobody);
- an empty environment (:data:`BASE_ENV` only), so no server secret reaches it;
- a fresh ``/work`` (its working folder) and ``/tmp``, each a size-limited tmpfs. A session's
  tools keep a host folder between calls: it is shown read-only, copied into the size-limited
  ``/work`` before the code runs, and ``/work`` is copied back (as a tar on the ready pipe,
  read up to the limit) once it ends; so the quota holds while the code runs, and the host
  folder only ever receives what fit. A run that is killed (wall time) keeps the folder as it
  was before the call;
- its own user, PID, IPC, UTS, mount, cgroup and network namespaces: no network at all (only
  a loopback device), no other process visible or signalable;
- rlimits set by ``prlimit`` (util-linux) inside the sandbox: CPU time, address space,
  processes (counted per user namespace, so per run), file size, open files, no core dumps.

Memory is bounded per process (RLIMIT_AS), so a run holds at most ``memory_mb`` x
``processes``; a cgroup would bound the total but needs a delegated cgroup, which bwrap does not
set up (the Docker backend's ``--memory`` is a cgroup limit on the whole container).

``--die-with-parent`` and the PID namespace make cleanup total: when the run ends or is killed,
the namespace's init dies and the kernel kills every process left in it. As root, the run
also drops to an unprivileged uid (``$ENVBUILDER_SANDBOX_UID``, default 65534 "nobody") with
``setpriv`` before bubblewrap starts, so even an escape lands as nobody. As another user it
runs as that user in its own user namespace (unprivileged user namespaces must be enabled).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from envbuilder.errors import SandboxError
from envbuilder.isolation.sandbox._backend import BASE_ENV, Backend
from envbuilder.isolation.sandbox._process import run_process
from envbuilder.isolation.sandbox._result import Limits, RunResult, Status
from envbuilder.isolation.sandbox._workdir import restore

#: Host paths shown read-only (when they exist); symlinks (merged /usr) are recreated as such.
SYSTEM_PATHS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
)
#: Extra host paths to show read-only, separated by ``:`` (an interpreter outside /usr).
EXTRA_PATHS_ENV = "ENVBUILDER_SANDBOX_PATHS"
UID_ENV = "ENVBUILDER_SANDBOX_UID"
_NOBODY = 65534
_OPEN_FILES = 256
_INSTALL_HINT = (
    "Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
)


class BubblewrapBackend(Backend):
    """Runs each command under ``bwrap`` in fresh namespaces with rlimits."""

    name = "bubblewrap"
    ENV = (EXTRA_PATHS_ENV, UID_ENV)

    def __init__(self, *, extra_paths: Sequence[str] | None = None, uid: int | None = None):
        if extra_paths is None:
            extra_paths = [p for p in os.environ.get(EXTRA_PATHS_ENV, "").split(":") if p]
        self.paths = (*SYSTEM_PATHS, *extra_paths)
        self.root = os.geteuid() == 0
        self.uid = uid if uid is not None else int(os.environ.get(UID_ENV, _NOBODY))

    def etc_files(self) -> dict[str, bytes]:
        """The sandbox's own ``/etc`` user and host files, in place of the host's (which list
        its users and groups): root, the user the run is, and nobody; the loopback host."""
        uid = self.uid if self.root else os.getuid()
        gid = self.uid if self.root else os.getgid()
        users = {0: ("root", 0, "/root"), uid: ("sandbox", gid, "/work"), _NOBODY: ("nobody", _NOBODY, "/")}
        groups = {0: "root", gid: "sandbox", _NOBODY: "nogroup"}
        passwd = "".join(
            f"{name}:x:{u}:{g}:{name}:{home}:/usr/sbin/nologin\n"
            for u, (name, g, home) in sorted(users.items())
        )
        group = "".join(f"{name}:x:{g}:\n" for g, name in sorted(groups.items()))
        return {
            "/etc/passwd": passwd.encode(),
            "/etc/group": group.encode(),
            "/etc/nsswitch.conf": b"passwd: files\ngroup: files\nhosts: files\n",
            "/etc/hosts": b"127.0.0.1 localhost sandbox\n::1 localhost\n",
        }

    def describe(self) -> str:
        who = f"uid {self.uid}" if self.root else "the server's user"
        return f"bubblewrap (no network, own namespaces, as {who})"

    def argv(
        self,
        command: Sequence[str],
        limits: Limits,
        fds: Mapping[str, int],
        workdir: Path | None = None,
        *,
        ready: bool = False,
    ) -> list[str]:
        """The full command line for one run; ``fds`` maps each file name to a readable fd,
        ``ready_fd`` (the launcher's stdin) is written to inside the sandbox once it is set up, just
        before the command starts: bwrap's own failures are thus told from the code's."""
        bwrap = shutil.which("bwrap")
        prlimit = shutil.which("prlimit")
        if bwrap is None:
            raise SandboxError(
                "the bubblewrap sandbox needs `bwrap`, which is not installed", hint=_INSTALL_HINT
            )
        if prlimit is None or not prlimit.startswith("/usr/"):
            raise SandboxError(
                "the bubblewrap sandbox needs `prlimit` in /usr (util-linux)", hint="Install util-linux"
            )
        out: list[str] = []
        if self.root:
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                raise SandboxError(
                    "running as root, the sandbox needs `setpriv` (util-linux) to drop to a uid"
                )
            out += [setpriv, f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups"]
        out += [bwrap]
        out += ["--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]
        out += ["--hostname", "sandbox"]
        for key, value in BASE_ENV.items():
            out += ["--setenv", key, value]
        for path in self.paths:
            out += _mirror(path)
        disk = str(limits.disk_mb * 1024 * 1024)
        out += ["--proc", "/proc", "--dev", "/dev", "--size", "1048576", "--tmpfs", "/dev/shm"]
        out += ["--size", disk, "--tmpfs", "/tmp"]
        if workdir is not None:
            out += ["--ro-bind", str(workdir), PERSIST]
        out += ["--size", disk, "--tmpfs", "/work"]
        for name, fd in fds.items():  # the run's files, then its own /etc files (absolute names)
            out += (
                ["--ro-bind-data", str(fd), name]
                if name.startswith("/")
                else ["--file", str(fd), f"/work/{name}"]
            )
        # bwrap builds the view on its own tmpfs: make it read-only, or it is an unbounded disk.
        out += ["--remount-ro", "/", "--chdir", "/work", "--"]
        if ready and workdir is not None:
            # As below, but the pipe is kept (fd 8, closed for the code) to send /work back; the
            # kept folder is copied in without replacing the run's own files (which win).
            signal = (
                f"printf 1 >&0 && exec 8>&0 0</dev/null && cp -R -n {PERSIST}/. /work/ 2>/dev/null; "
                '"$@" 8>&-; rc=$?; tar -C /work -cf - . >&8 2>/dev/null; exit $rc'
            )
            out += ["/bin/sh", "-c", signal, "sh"]
        elif ready:
            # The launcher's stdin is the ready pipe: signal "set up", give the code /dev/null
            # as stdin instead (it never holds the pipe), then become prlimit.
            signal = 'printf 1 >&0 && exec 0</dev/null && exec "$@"'
            out += ["/bin/sh", "-c", signal, "sh"]
        out += [prlimit]
        out += [
            f"--cpu={limits.cpu_rlimit}:{limits.cpu_rlimit + 1}",
            f"--as={limits.memory_mb * 1024 * 1024}",
            f"--nproc={limits.processes}",
            f"--fsize={disk}",
            f"--nofile={_OPEN_FILES}",
            "--core=0",
            "--",
            *command,
        ]
        return out

    async def _run(
        self, command: Sequence[str], files: Mapping[str, bytes], limits: Limits, workdir: Path | None
    ) -> RunResult:
        if shutil.which(command[0], path=BASE_ENV["PATH"]) is None and not any(
            command[0].startswith(p.rstrip("/") + "/") for p in self.paths
        ):
            raise SandboxError(
                f"the command {command[0]!r} is not in the sandbox (searched {BASE_ENV['PATH']})",
                hint=f"Install it under /usr, or show its folder with {EXTRA_PATHS_ENV}",
            )
        ready_r, ready_w = os.pipe()
        open_fds = [ready_w]

        def close_write() -> None:  # once: the fd number may be reused after
            while open_fds:
                os.close(open_fds.pop())

        # What comes back on the ready pipe: "1", then /work as a tar when a folder is kept;
        # read while the run goes (a pipe holds 64 KiB), at most the disk limit and a margin.
        cap = 1 + (limits.disk_mb * 1024 * 1024 + (1 << 20) if workdir is not None else 0)
        reader = _PipeReader(ready_r, cap)
        try:
            with _memfds({**files, **self.etc_files()}) as fds:
                argv = self.argv(command, limits, fds, workdir, ready=True)
                try:
                    result = await run_process(
                        argv, limits, stdin=ready_w, pass_fds=list(fds.values()), after_start=close_write
                    )
                except OSError as exc:
                    raise SandboxError(
                        f"bubblewrap could not be started: {exc}", hint=_INSTALL_HINT
                    ) from None
            close_write()
            back = await asyncio.to_thread(reader.result)
        finally:
            close_write()
            reader.close()
        ready = back[:1]
        if workdir is not None and ready and result.status != Status.TIMEOUT:
            await asyncio.to_thread(restore, workdir, back[1:], limits.disk_mb * 1024 * 1024)
        if not ready and result.exit_code is not None:
            # bwrap failed before the command started (no user namespaces, a bad mount): the
            # code never ran. (The code never holds the pipe: this cannot be faked.)
            raise SandboxError(f"bubblewrap failed: {result.stderr.strip()[:300]}")
        return result


PERSIST = "/persist"
"""Where a kept folder is shown, read-only, to the run's set-up (copied from into ``/work``)."""


class _PipeReader:
    """Reads a pipe to its end (or ``cap`` bytes) on a daemon thread; closes it after."""

    def __init__(self, fd: int, cap: int):
        self._fd, self._cap = fd, cap
        self._chunks: list[bytes] = []
        self._thread = threading.Thread(target=self._read, name="envbuilder-sandbox-pipe", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        size = 0
        with contextlib.suppress(OSError):
            while size < self._cap and (chunk := os.read(self._fd, 1 << 16)):
                self._chunks.append(chunk)
                size += len(chunk)

    def result(self) -> bytes:
        self._thread.join(30)
        return b"".join(self._chunks)[: self._cap]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


def confined_python(argv: Sequence[str]) -> list[str]:
    """``argv`` (this interpreter starting a worker zygote) under bubblewrap: fresh namespaces
    (no network, no other process visible), a clear environment, and a read-only view of the
    system paths and this Python's own (its prefixes and import paths) only; a private ``/tmp``
    and ``/dev/shm`` of a few MiB; ``/`` as the working folder.

    For workers that run code an answer can steer (a checker that evaluates the answer), where
    the code sandbox's per-run start-up would cost too much. As root, bubblewrap runs privileged
    (no user namespace, so that the worker's files need not be readable by another user) and the
    worker keeps only ``CAP_SETUID``/``CAP_SETGID``, for its children to drop to an unprivileged
    uid (``envbuilder.isolation.processes``); as another user, in its own user namespace, no nested ones.
    Raises SandboxError without bwrap.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxError("a confined worker needs `bwrap`, which is not installed", hint=_INSTALL_HINT)
    package = _PACKAGE
    paths = dict.fromkeys(
        [
            *SYSTEM_PATHS,
            sys.base_prefix,
            sys.prefix,
            str(package),  # the envbuilder package (alone: not the folder it lies in)
            # Its import paths, not the folder it was started from (an operator's files), but
            # the folders $PYTHONPATH names (which the worker is given).
            *(os.path.realpath(p) for p in sys.path if p and os.path.isdir(p) and p != os.getcwd()),
            *(os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(":") if os.path.isdir(p)),
        ]
    )
    out = [bwrap, "--die-with-parent", "--new-session", "--clearenv", "--cap-drop", "ALL"]
    if os.geteuid() == 0:
        out += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        out += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        out += ["--unshare-all", "--unshare-user"] + (
            ["--disable-userns"] if _supports("--disable-userns") else []
        )
    for key, value in {**BASE_ENV, **_THREADS}.items():
        out += ["--setenv", key, value]
    # The worker imports this very envbuilder, found first: the folder that holds the package is
    # not shown whole (an editable install's is the operator's checkout, and often the working
    # folder), so nothing else puts it on the worker's path.
    pythonpath = [str(package.parent), *filter(None, os.environ.get("PYTHONPATH", "").split(":"))]
    out += ["--setenv", "PYTHONPATH", ":".join(dict.fromkeys(pythonpath))]
    # The private /tmp first: Python or the project may live below /tmp (a CI clone's virtualenv),
    # and a mount made after the binds would hide them.
    out += ["--proc", "/proc", "--dev", "/dev"]
    out += ["--perms", "01777", "--size", str(_SCRATCH_BYTES), "--tmpfs", "/tmp"]
    out += ["--perms", "01777", "--size", str(_SCRATCH_BYTES), "--tmpfs", "/dev/shm"]
    # The folders on the way to a shown path, readable by the worker's children whatever the
    # host's are (a CI clone in a mktemp folder is 0700). An import path that is, or holds, one
    # of the sandbox's own mounts (`/`, `/tmp`) would show the host's instead: never shown.
    own = ("/tmp", "/dev", "/proc")
    shown = [
        p
        for p in paths
        if os.path.lexists(p)
        and not any(m == p.rstrip("/") or m.startswith(p.rstrip("/") + "/") for m in own)
    ]
    for folder in _ancestors(shown):
        out += ["--perms", "0755", "--dir", folder]
    for path in shown:
        out += _mirror(path)
    out += ["--remount-ro", "/", "--chdir", "/", "--", *argv]
    return out


#: The envbuilder package this module belongs to (``envbuilder/isolation/sandbox/_bwrap.py``).
_PACKAGE = Path(__file__).resolve().parents[2]

_THREADS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_SCRATCH_BYTES = 16 << 20


def _ancestors(paths: Sequence[str]) -> list[str]:
    """The folders above ``paths`` that neither one of them nor a mount of the sandbox's own
    (``/tmp``, ``/dev``, ``/proc``) covers, outermost first."""
    covered = [*paths, "/tmp", "/dev", "/proc"]
    out: dict[str, None] = {}
    for path in paths:
        parent = os.path.dirname(path.rstrip("/"))
        chain = []
        while parent not in ("/", "") and not any(
            parent == p or parent.startswith(p.rstrip("/") + "/") for p in covered
        ):
            chain.append(parent)
            parent = os.path.dirname(parent)
        for folder in reversed(chain):
            out[folder] = None
    return list(out)


@functools.cache
def _supports(option: str) -> bool:
    """Whether this bwrap knows ``option`` (``--disable-userns`` is 0.8+)."""
    bwrap = shutil.which("bwrap")
    try:
        done = subprocess.run([bwrap or "bwrap", "--help"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option.encode() in done.stdout + done.stderr


def _mirror(path: str) -> list[str]:
    """bwrap arguments showing host ``path`` read-only (a symlink as the same symlink)."""
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    if os.path.exists(path):
        return ["--ro-bind", path, path]
    return []


@contextlib.contextmanager
def _memfds(files: Mapping[str, bytes]) -> Iterator[dict[str, int]]:
    """Each file's content in an anonymous in-memory file, rewound, for ``bwrap --file``."""
    fds: dict[str, int] = {}
    try:
        for name, data in files.items():
            fd = fds[name] = os.memfd_create(name, os.MFD_CLOEXEC)  # pass_fds opens it to bwrap
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.lseek(fd, 0, os.SEEK_SET)
        yield fds
    finally:
        for fd in fds.values():
            os.close(fd)
