"""Length-prefixed frames on the sockets between the server and its worker processes, and the
errors a call through them ends with.

A frame is a 4-byte big-endian length and that many bytes. The server reads every frame under a
deadline and a size bound (:func:`read_frame`), so a worker that writes forever, writes nothing
or announces a huge frame costs one call, never the server. Descriptors travel with a frame
(``SCM_RIGHTS``): that is how a worker's fresh child gets the private socket of its one call.
"""

from __future__ import annotations

import array
import select
import socket
import struct
import threading
import time

__all__ = [
    "CheckTimeout",
    "CodeRefused",
    "FrameTooLong",
    "PeerClosed",
    "WorkerError",
    "WorkerFailed",
    "frame",
    "read_frame",
    "recv_frame",
    "send_frame",
]

HEADER = struct.Struct("!I")
_MAX_FDS = 4


class CheckTimeout(TimeoutError):
    """The work ran past its deadline; its process was killed."""


class WorkerFailed(RuntimeError):
    """The work's process died, could not start, or replied with something that is not a
    reply (too long, not JSON, not its schema); the message says which, in words of ours."""


class WorkerError(WorkerFailed):
    """The function raised in its process. ``kind`` is the exception's class name when it is one
    of Python's built-in exceptions, else ``Exception`` (a worker's words are not repeated)."""

    def __init__(self, kind: str):
        super().__init__(f"the work raised {kind}")
        self.kind = kind


class CodeRefused(WorkerFailed):
    """The input tried to run code in a guarded worker and the guard refused it. ``what`` is
    one of ``_reply.REFUSALS`` (``code``, ``process``, ``file``, …)."""

    def __init__(self, what: str):
        super().__init__(f"the input tried to run code ({what}) and was refused")
        self.what = what


class PeerClosed(Exception):
    """The other end closed before a whole frame came."""


class FrameTooLong(Exception):
    """A frame announced more bytes than the reader takes."""


def frame(payload: bytes) -> bytes:
    """``payload`` with its length in front."""
    return HEADER.pack(len(payload)) + payload


def send_frame(sock: socket.socket, payload: bytes, fds: tuple[int, ...] = ()) -> None:
    """Send one frame, with ``fds`` attached to its first bytes."""
    data = frame(payload)
    if fds:
        sent = socket.send_fds(sock, [data], list(fds))
        data = data[sent:]
    if data:
        sock.sendall(data)


def read_frame(
    sock: socket.socket, limit: int, until: float, cancelled: threading.Event | None = None
) -> bytes:
    """The next frame's payload, read before the monotonic time ``until``.

    Raises:
        CheckTimeout: ``until`` passed or ``cancelled`` was set first.
        FrameTooLong: the frame announced more than ``limit`` bytes (the rest is not read).
        PeerClosed: the other end closed first.
    """
    header = _read(sock, HEADER.size, until, cancelled)
    (size,) = HEADER.unpack(header)
    if size > limit:
        raise FrameTooLong
    return _read(sock, size, until, cancelled)


def _read(sock: socket.socket, need: int, until: float, cancelled: threading.Event | None) -> bytes:
    buf = bytearray()
    while len(buf) < need:
        left = until - time.monotonic()
        if left <= 0 or (cancelled is not None and cancelled.is_set()):
            raise CheckTimeout
        ready, _, _ = select.select([sock], [], [], min(left, 0.25))
        if ready:
            try:
                chunk = sock.recv(min(need - len(buf), 1 << 20))
            except (ConnectionError, OSError):
                chunk = b""
            if not chunk:
                raise PeerClosed
            buf += chunk
    return bytes(buf)


def recv_frame(sock: socket.socket, limit: int) -> tuple[bytes, list[int]]:
    """The next frame (blocking) and the descriptors sent with it, for a worker reading its
    server; ``b""`` when the server is gone or the frame is over ``limit``."""
    fds: list[int] = []
    header = _recv_exact(sock, HEADER.size, fds)
    if len(header) < HEADER.size:
        return b"", fds
    (size,) = HEADER.unpack(header)
    if size > limit:
        return b"", fds
    payload = _recv_exact(sock, size, fds)
    return (payload if len(payload) == size else b""), fds


def _recv_exact(sock: socket.socket, need: int, fds: list[int]) -> bytes:
    buf = bytearray()
    space = socket.CMSG_SPACE(_MAX_FDS * array.array("i").itemsize)
    while len(buf) < need:
        try:
            data, ancillary, _, _ = sock.recvmsg(need - len(buf), space)
        except OSError:
            return bytes(buf)
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(payload[: len(payload) - len(payload) % got.itemsize])
                fds.extend(got)
        if not data:
            return bytes(buf)
        buf += data
    return bytes(buf)
