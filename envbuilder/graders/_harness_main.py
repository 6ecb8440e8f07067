"""The Python test harness the ``unit_tests`` grader runs in the sandbox (``harness:``); stdlib only.

Run as ``python3 -I main.py``. The tests never share a process with the answer's code:

1. This process (the harness) reads the run's secret nonce from ``nonce.txt`` and the hidden
   tests from ``tests.py``, deletes both files and makes itself undumpable, so nothing started
   later can read either (not from the folder, not from ``/proc/<pid>/mem``).
2. It starts the answer's code (``solution.py``) in a fresh interpreter, the *solution*
   process, which defines the entry point and answers calls over two pipes.
3. It runs the tests with the entry point bound to a proxy: each call is sent to the solution
   process and its return value comes back as data. Only built-in values cross (``None``,
   ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes`` and ``list``/``tuple``/``dict``/
   ``set``/``frozenset`` of them, exact types, no subclasses), so an object whose ``__eq__``
   always says True never reaches a comparison: a call that returns one fails the tests.
4. Only when the tests have returned does it print the nonce. The answer's code never held the
   nonce, so ``os._exit(0)``, ``sys.exit(0)`` or a killed harness cannot look like a pass.

The harness's own lines start with ``envbuilder-harness:<nonce>:`` (so the answer's code cannot
write one): ``passed`` on stdout once the tests returned, else the reason on stderr, without
the tests' code or values (an exception raised by the answer's own code is named with its
message: that is the answer's, not the tests').

When the solution process ends before the tests finished, the harness reaps it and says how,
from what the kernel reports, never from what the code printed: killed at its CPU time limit
(``SIGXCPU`` at the soft ``RLIMIT_CPU``, ``SIGKILL`` at the hard one, after using most of that
much CPU: the limit read before the code started), killed by another signal, or its exit status.
"""

import builtins
import contextlib
import json
import os
import resource
import signal
import struct
import subprocess
import sys
import time

PREFIX = "envbuilder-harness:"
MAX_MESSAGE = 16 * 1024 * 1024
MAX_DEPTH = 64
#: How long a solution process whose pipe closed has to end before it is killed.
REAP_SECONDS = 5.0
#: The share of the CPU limit a process killed by SIGXCPU or SIGKILL must have used for the
#: limit to be the reason. The time reported for a process the kernel killed at its limit can
#: be a little below it (seen: 0.92 s for a two-thread process at a 1 s limit, in a container).
CPU_SHARE = 0.75
ENDED = "the code's process ended before the tests finished"
KILLED = ENDED + " (killed by {})"
MEMORY = "memory limit: the code ran out of memory"
_ATOMS = (type(None), bool, int, str)
NONCE = ""


class NotData(TypeError):
    """A value that is not built-in data (see the module docstring)."""


def encode(value, depth=0):
    """``value`` as JSON-ready data that keeps its exact type; raises NotData otherwise."""
    if depth > MAX_DEPTH:
        raise NotData("nested too deeply")
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is float:
        return {"f": repr(value)}
    if kind is complex:
        return {"c": [repr(value.real), repr(value.imag)]}
    if kind is bytes:
        return {"b": value.hex()}
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    if kind is tuple:
        return {"t": [encode(v, depth + 1) for v in value]}
    if kind is set or kind is frozenset:
        return {"s" if kind is set else "fs": [encode(v, depth + 1) for v in value]}
    if kind is dict:
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    raise NotData(f"a value of type {kind.__name__}")


def decode(data):
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    ((tag, body),) = data.items()
    if tag == "f":
        return float(body)
    if tag == "c":
        return complex(float(body[0]), float(body[1]))
    if tag == "b":
        return bytes.fromhex(body)
    if tag == "t":
        return tuple(decode(v) for v in body)
    if tag == "s":
        return {decode(v) for v in body}
    if tag == "fs":
        return frozenset(decode(v) for v in body)
    if tag == "d":
        return {decode(k): decode(v) for k, v in body}
    raise ValueError(f"unknown tag {tag!r}")


def send(fd, message):
    data = json.dumps(message).encode()
    data = struct.pack(">I", len(data)) + data
    while data:
        data = data[os.write(fd, data) :]


def receive(fd):
    head = _read_exactly(fd, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">I", head)
    if size > MAX_MESSAGE:
        raise ValueError("message too large")
    body = _read_exactly(fd, size)
    if body is None:
        return None
    return json.loads(body)


def _read_exactly(fd, size):
    chunks = bytearray()
    while len(chunks) < size:
        chunk = os.read(fd, size - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def fail(reason, code=1):
    sys.stderr.write(f"\n{PREFIX}{NONCE}: {reason}\n")
    sys.stderr.flush()
    os._exit(code)


def _undumpable():
    """PR_SET_DUMPABLE 0: other processes of the same user cannot read this one's memory."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    except Exception:
        pass


# ---- the solution process ------------------------------------------------------------------


def serve_solution(entry_point, rfd, wfd):
    namespace = {"__name__": "__main__"}
    with open("solution.py", encoding="utf-8") as f:
        source = f.read()
    try:
        exec(compile(source, "solution.py", "exec"), namespace)
    except BaseException as exc:  # the answer's own failure, reported as such
        send(wfd, {"load_error": f"{type(exc).__name__}: {_short(exc)}"})
        return
    function = namespace.get(entry_point)
    if not callable(function):
        send(wfd, {"load_error": f"the code defines no function named {entry_point!r}"})
        return
    send(wfd, {"ready": True})
    while True:
        message = receive(rfd)
        if message is None:
            return
        args, kwargs = decode(message["args"]), decode(message["kwargs"])
        try:
            result = function(*args, **kwargs)
        except BaseException as exc:
            send(wfd, {"raised": type(exc).__name__, "message": _short(exc)})
            continue
        try:
            send(wfd, {"value": encode(result)})
        except NotData as exc:
            send(wfd, {"not_data": str(exc)})


def _short(exc, limit=300):
    text = str(exc)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---- the harness process -------------------------------------------------------------------


class Solution:
    """The proxy the tests call in place of the entry point."""

    def __init__(self, entry_point):
        self.entry_point = entry_point
        # Read before the code starts: what the kernel holds the solution process to.
        self.cpu_limit = resource.getrlimit(resource.RLIMIT_CPU)[0]
        to_child_r, self._w = os.pipe()
        self._r, from_child_w = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-I", os.path.abspath(__file__), "--solution", entry_point],
            stdin=subprocess.DEVNULL,
            pass_fds=(to_child_r, from_child_w),
            env={**os.environ, "ENVBUILDER_HARNESS_FDS": f"{to_child_r},{from_child_w}"},
        )
        os.close(to_child_r)
        os.close(from_child_w)
        reply = self._reply()
        if "load_error" in reply:
            if reply["load_error"].startswith("MemoryError:"):
                fail(MEMORY)
            fail(f"the code could not be loaded: {reply['load_error']}")

    def _reply(self):
        try:
            reply = receive(self._r)
        except ValueError:
            reply = None
        if reply is None:
            fail(self.ended())
        return reply

    def ended(self):
        """Why the solution process, whose pipe closed, ended: from the kernel's account of it
        (its wait status and CPU time), killed first if it lingers."""
        deadline = time.monotonic() + REAP_SECONDS
        while True:
            pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:  # not reaped yet, so the pid is still its own
                os.kill(self.process.pid, signal.SIGKILL)
                _, status, _ = os.wait4(self.process.pid, 0)
                self.process.returncode = os.waitstatus_to_exitcode(status)
                return f"{ENDED} (it closed its pipe to the tests and went on)"
            time.sleep(0.01)
        self.process.returncode = code = os.waitstatus_to_exitcode(status)
        if code >= 0:
            return f"{ENDED} (exit status {code})"
        number = -code
        used = usage.ru_utime + usage.ru_stime
        limit = self.cpu_limit
        if (
            number in (signal.SIGXCPU, signal.SIGKILL)
            and limit != resource.RLIM_INFINITY
            and used >= CPU_SHARE * limit
        ):
            return f"cpu time limit: the code used its {limit} s of CPU time and was killed"
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return KILLED.format(name)

    def __call__(self, *args, **kwargs):
        try:
            send(self._w, {"args": encode(list(args)), "kwargs": encode(kwargs)})
        except NotData as exc:
            fail(f"the tests pass {exc} to {self.entry_point}, which the harness cannot send", code=3)
        except OSError:
            fail(self.ended())
        reply = self._reply()
        if "value" in reply:
            return decode(reply["value"])
        if "not_data" in reply:
            fail(
                f"{self.entry_point} returned {reply['not_data']}; only built-in values "
                "(numbers, strings, bytes, None and lists, tuples, dicts, sets of them) are compared"
            )
        name = reply["raised"]
        if name == "MemoryError":
            fail(MEMORY)
        if name == "BlockingIOError" or "Resource temporarily unavailable" in reply["message"]:
            fail("process limit: the code could not start another process")
        cls = getattr(builtins, name, None)
        # A StopIteration escaping the function would end the tests' `map`/`filter`/generator
        # early and silently (every assertion "passes" on nothing): it is an error, as PEP 479
        # makes it inside generators.
        if not (isinstance(cls, type) and issubclass(cls, Exception)) or issubclass(
            cls, (StopIteration, StopAsyncIteration)
        ):
            cls = RuntimeError
        raise cls(f"{name} raised by {self.entry_point}: {reply['message']}")

    def stop(self):
        os.close(self._w)
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait()


def run_tests(entry_point, call):
    global NONCE
    with open("nonce.txt", encoding="ascii") as f:
        NONCE = f.read().strip()
    with open("tests.py", encoding="utf-8") as f:
        tests = f.read()
    os.unlink("nonce.txt")
    os.unlink("tests.py")
    _undumpable()
    solution = Solution(entry_point)
    namespace = {"__name__": "__tests__", entry_point: solution, "candidate": solution}
    try:
        exec(compile(tests, "tests.py", "exec"), namespace)
        namespace[entry_point] = namespace["candidate"] = solution
        if call:
            exec(compile(call, "call", "exec"), namespace)
    except SystemExit:
        fail("the tests exited before they finished")
    except BaseException as exc:
        message = str(exc)
        # An exception the answer's function raised carries its own message; a failed
        # assertion of the tests is named by its type only (its text may hold expected values).
        own = message if f" raised by {entry_point}: " in message else ""
        fail(f"a test failed: {type(exc).__name__}" + (f" ({own})" if own else ""))
    solution.stop()
    sys.stdout.flush()
    sys.stdout.write(f"\n{PREFIX}{NONCE}: passed\n")
    sys.stdout.flush()


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--solution":
        rfd, wfd = (int(fd) for fd in os.environ.pop("ENVBUILDER_HARNESS_FDS").split(","))
        serve_solution(sys.argv[2], rfd, wfd)
        return
    config = json.loads(sys.argv[1])
    run_tests(config["entry_point"], config.get("call") or "")


if __name__ == "__main__":
    main()
