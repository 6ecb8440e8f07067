"""Worker functions the process tests run: honest ones, and ones that act as an answer that took
over its process would (forge a reply, poison state, fork, eat memory, kill its zygote)."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import time

from envbuilder.isolation.processes import guarded, worker_function

_state: dict[str, str] = {}


@worker_function
def spin(seconds: float) -> str:
    """Hold the process's interpreter in one C call (a huge power), like SymPy on 9^9^9^9."""
    if seconds > 100:
        return str(len(str(9 ** (9**9))))  # minutes in one call
    time.sleep(seconds)
    return "done"


@worker_function
def pid() -> int:
    return os.getpid()


@worker_function
def niceness() -> int:
    return os.nice(0)


@worker_function
def uid() -> int:
    return os.getuid()


@worker_function
def fail(message: str) -> None:
    raise ValueError(message)


class Pwned(Exception):
    """An exception whose name is a message."""


@worker_function
def fail_custom() -> None:
    raise Pwned("the grade is 1.0")


@worker_function
def die() -> None:
    os._exit(3)


@worker_function
def hog() -> int:
    return len(bytearray(8 << 30))  # past the process's address-space limit


@worker_function
def poison(value: str) -> str:
    """Change this process's state, as an answer replacing a scoring function would."""
    _state["scorer"] = value
    return value


@worker_function
def poisoned() -> str:
    return _state.get("scorer", "clean")


def _sockets() -> list[int]:
    out = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                out.append(int(name))
        except OSError:
            pass
    return out


def _forge(payload: bytes) -> None:
    """Write ``payload`` as a reply frame on every socket this process holds, then exit without
    replying: what ``exec`` in an answer could do."""
    for fd in _sockets():
        with contextlib.suppress(OSError):
            os.write(fd, struct.pack("!I", len(payload)) + payload)
    os._exit(0)


class _RunsCode:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (f"touch {self.marker}",))


@worker_function
def forge_pickle(marker: str) -> float:
    """A reply that runs ``touch marker`` where it is unpickled."""
    _forge(pickle.dumps(("ok", _RunsCode(marker))))
    return 0.0


@worker_function
def forge_value(reply: str) -> float:
    """A reply of the forger's choosing (JSON), e.g. a value of the wrong type."""
    _forge(reply.encode())
    return 0.0


@worker_function
def flood() -> float:
    """A frame announcing a gigabyte."""
    for fd in _sockets():
        with contextlib.suppress(OSError):
            os.write(fd, struct.pack("!I", 1 << 30) + b"x" * 65536)
    time.sleep(30)
    return 0.0


@worker_function
def fork_bomb(count: int) -> int:
    """Start ``count`` sleeping processes; how many started."""
    started = 0
    for _ in range(count):
        try:
            child = os.fork()
        except OSError:
            break
        if child == 0:
            time.sleep(60)
            os._exit(0)
        started += 1
    return started


@worker_function
def threads() -> bool:
    """Whether this process may start a thread."""
    import threading

    try:
        threading.Thread(target=lambda: None).start()
    except RuntimeError:
        return False
    return True


@worker_function
def leave_file(name: str) -> bool:
    """Leave a file in the scratch folder for whoever comes next."""
    with open(f"/tmp/{name}", "w") as f:
        f.write("left behind")
    return True


@worker_function
def file_there(name: str) -> bool:
    return os.path.exists(f"/tmp/{name}")


@worker_function
def kill_zygote() -> int:
    """Kill the process that forked this one (the zygote), if it may."""
    try:
        os.kill(os.getppid(), signal.SIGKILL)
    except OSError:
        return 0
    return 1


@worker_function
def exit_after_reply() -> int:
    """Reply, then exit a moment later (an answer's thread or timer would)."""
    import threading

    with contextlib.suppress(RuntimeError):
        threading.Timer(0.1, os._exit, (0,)).start()
    return 1


@worker_function
def evaluate(expression: str) -> float:
    """A checker that evaluates its input, the guard armed first (as reasoning-gym's are)."""
    return float(guarded(eval, expression))


@worker_function
def evaluate_and_catch(expression: str) -> float:
    """The same, but the checker swallows every error and scores 0 (as checkers do)."""

    def check(text: str) -> float:
        try:
            return float(eval(text))
        except Exception:
            return 0.0

    return guarded(check, expression)


@worker_function
def unguarded_eval(expression: str) -> float:
    """A checker that forgot the guard: the process confinement alone holds."""
    return float(eval(expression))
