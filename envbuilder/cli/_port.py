"""Is a port free to listen on? Checked before `serve` loads anything, naming the holder if it can."""

from __future__ import annotations

import errno
import socket
from typing import Any

__all__ = ["port_taken"]


def port_taken(host: str, port: int) -> str | None:
    """None when ``host:port`` can be listened on; else why not, with the process holding it when
    the system says (through psutil, a dev dependency: without it, or without the right to see
    other users' processes, the message just leaves the holder out)."""
    if port == 0:
        return None  # the system picks a free port
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"cannot listen on {host}:{port}: {exc.strerror}"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return f"cannot listen on {host}:{port}: {exc.strerror}"
            holder = _holder(port)
            return f"{host}:{port} is already in use" + (f" by {holder}" if holder else "")
    return None


def _holder(port: int) -> str | None:
    """``pid 123 (python -m http.server)`` for the process listening on ``port``, if visible."""
    try:
        import psutil
    except ImportError:
        return None
    try:
        for conn in psutil.net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                try:
                    process = _server(psutil, psutil.Process(conn.pid), port)
                    command = " ".join(" ".join(process.cmdline()).split()) or process.name()
                except psutil.Error:
                    return f"pid {conn.pid}"
                return f"pid {process.pid} ({command[:80]})"
    except (psutil.Error, OSError):
        return None
    return None


def _server(psutil: Any, process: Any, port: int) -> Any:
    """The topmost ancestor of ``process`` that listens on ``port`` too: a server whose workers
    share its socket (``serve --workers``, gunicorn, uvicorn) is named by the server's pid, which
    stops them all, not by the worker the system happened to list."""
    while True:
        try:
            parent = process.parent()
            listens = parent is not None and any(
                c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
                for c in parent.net_connections(kind="inet")
            )
        except psutil.Error:  # an ancestor we may not inspect (init, another user's)
            return process
        if not listens:
            return process
        process = parent
