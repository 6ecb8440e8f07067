"""A worker process's side: a clean parent (the "zygote") that forks a fresh child for every call.

The zygote never sees a call's input. It only runs what the server asks on its control socket:
import a module, run a registered preparation (build a dataset the served spec declares,
compile the spec's template) so that children start warm, and fork. Each child:

1. gets its own socket for this one call (passed over the control socket, ``SCM_RIGHTS``) and
   closes every other descriptor, the zygote's control socket included, before anything else;
2. takes the per-call limits (:data:`LIMITS`): where an answer may run code (``alone``), no new
   process or thread (``RLIMIT_NPROC`` 1, which the kernel enforces for any uid but root's, hence
   the drop to ``drop_uid`` when the zygote is root); a CPU-time limit just past the call's
   deadline, small files, few descriptors (the zygote already runs under the address-space
   limit, and the child inherits it);
3. reads its request (pickled by the server, which alone holds the other end), runs the
   registered function, writes one reply (``_reply``: JSON, never pickle) and is killed.

The zygote then kills whatever is left (in its PID namespace, when confined), wipes the
sandbox's ``/tmp`` and ``/dev/shm`` and says ``done``; a sandbox left with System V IPC objects
(which outlive their process) is not reused: the zygote exits and the server starts another.
So no child ever serves two calls, a child cannot reach the zygote's channel (the zygote is
non-dumpable: its ``/proc`` entries and memory are closed to the child), and what one answer
does to its process is gone before the next answer is read.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import pickle
import resource
import shutil
import signal
import socket
from typing import Any

from envbuilder.isolation.processes import _guard
from envbuilder.isolation.processes._frames import frame, recv_frame, send_frame
from envbuilder.isolation.processes._registry import lookup
from envbuilder.isolation.processes._reply import encode_error, encode_ok, encode_refused

__all__ = ["CONTROL_LIMIT", "FILE_LIMIT", "LIMITS", "NICENESS", "REQUEST_LIMIT", "main"]

NICENESS = 10
"""How much a worker yields the CPU to the server (``nice``): it works at full speed on an idle
core, and on a busy one the event loop answering everyone else goes first."""
FILE_LIMIT = 16 << 20
"""Bytes any file a worker writes may reach (``RLIMIT_FSIZE``)."""
LIMITS = {"processes": 1, "open_files": 64}
"""A child's own limits: ``RLIMIT_NPROC`` (no process or thread besides itself) and
``RLIMIT_NOFILE``."""
CONTROL_LIMIT = 16 << 20
"""Bytes of one control message (a preparation's arguments: a template's source)."""
REQUEST_LIMIT = 256 << 20
"""Bytes of one call's request (a batch of task rows to render)."""
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_SCRATCH = ("/tmp", "/dev/shm")


def main(
    fd: int, memory_limit: int, confined: bool, drop_uid: int | None, server: int = 0, alone: bool = True
) -> None:
    """Run the zygote on the control socket ``fd`` until the server closes it. ``confined``:
    inside bubblewrap (its own PID namespace, ``/tmp`` and IPC); ``drop_uid``: the uid a child
    drops to when the zygote runs as root; ``server``: the pid of the process that started it;
    ``alone``: a child may start no process or thread (``RLIMIT_NPROC`` 1; where an answer may
    run code), else it may start threads of its own (a render's deadline is a thread)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if not confined:
        # Die with the server (bubblewrap's --die-with-parent does it for a confined one).
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != server:  # the server was gone before the signal was asked for
            return  # (compared with its pid, not 1: in a container the server often is pid 1)
    libc.prctl(_PR_SET_DUMPABLE, 0)  # children (same uid) cannot ptrace us or open our /proc files
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    for limit, value in ((resource.RLIMIT_AS, memory_limit), (resource.RLIMIT_FSIZE, FILE_LIMIT)):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(limit, (value, value))
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    control = socket.socket(fileno=fd)
    _say(control, {"ready": os.getpid()})
    while True:
        data, fds = recv_frame(control, CONTROL_LIMIT)
        if not data:
            return
        message = json.loads(data)
        op = message.get("op")
        if op == "fork" and len(fds) == 1:
            if not _serve_one(control, fds[0], libc, confined, drop_uid, alone):
                return
            continue
        for extra in fds:
            os.close(extra)
        try:
            if op == "import":
                importlib.import_module(str(message["module"]))
            elif op == "prepare":
                entry = lookup(str(message["name"]))
                if entry is None:
                    raise LookupError(message["name"])
                entry.fn(*message["args"])
            else:
                raise ValueError(op)
            gc.freeze()  # what is built now is shared with every child, not copied by its GC
            _say(control, {"ok": True})
        except Exception as exc:
            _say(control, {"error": type(exc).__name__})


def _say(control: socket.socket, message: dict[str, Any]) -> None:
    send_frame(control, json.dumps(message).encode())


def _serve_one(
    control: socket.socket, call: int, libc: Any, confined: bool, drop_uid: int | None, alone: bool
) -> bool:
    """Fork the child for one call on socket ``call``, wait for the server's ``reap``, kill and
    reap the child, clean up; False when this zygote must not serve again."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (its coverage is not collected)
        try:
            _child(call, libc, drop_uid, alone)
        finally:
            os._exit(70)
    os.close(call)
    _say(control, {"forked": pid})
    data, fds = recv_frame(control, CONTROL_LIMIT)
    for extra in fds:
        os.close(extra)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    clean = _clear(confined)
    if not data:  # the server is gone
        return False
    done: dict[str, Any] = (
        {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else {"exit": os.WEXITSTATUS(status)}
    )
    if not clean:
        return False  # the server sees the control socket close and starts another
    _say(control, {"done": done})
    return True


def _clear(confined: bool) -> bool:
    """Kill what the child left in this sandbox and empty its scratch folders; False when
    something outlives that (System V IPC objects). Unconfined there is nothing of ours to
    clear: the child could not start a process (``RLIMIT_NPROC``)."""
    if not confined:
        return True
    with contextlib.suppress(OSError):
        os.kill(-1, signal.SIGKILL)  # every process of ours in this PID namespace but us
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    for folder in _SCRATCH:
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
    for table in ("shm", "msg", "sem"):
        with contextlib.suppress(OSError), open(f"/proc/sysvipc/{table}") as listing:
            if len(listing.read().splitlines()) > 1:
                return False
    return True


def _child(call: int, libc: Any, drop_uid: int | None, alone: bool) -> None:  # pragma: no cover
    """One call in a fresh child of the zygote (never returns)."""
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    os.closerange(3, call)
    os.closerange(call + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    if drop_uid is not None and os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(drop_uid, drop_uid, drop_uid)
        os.setresuid(drop_uid, drop_uid, drop_uid)
    if alone:
        resource.setrlimit(resource.RLIMIT_NPROC, (LIMITS["processes"], LIMITS["processes"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMITS["open_files"], LIMITS["open_files"]))
    sock = socket.socket(fileno=call)
    sock.settimeout(60)
    data, _ = recv_frame(sock, REQUEST_LIMIT)
    if not data:
        os._exit(71)
    name, args, cpu_seconds = pickle.loads(data)
    cpu = max(1, int(cpu_seconds) + 1)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    _guard.in_child()
    try:
        entry = lookup(name)
        if entry is None:
            raise LookupError(name)
        reply = encode_ok(entry.fn(*args))
    except BaseException as exc:
        reply = encode_error(exc)
    refused = _guard.refusal()
    if refused is not None:
        reply = encode_refused(refused)
    view = memoryview(frame(reply))
    while view:
        view = view[os.write(call, view) :]
    os._exit(0)
