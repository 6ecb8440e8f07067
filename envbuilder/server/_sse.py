"""Server-Sent Events framing exactly as the ORS clients parse it (docs/protocol.md §4)."""

from __future__ import annotations

import datetime as dt

CHUNK = 4096
MEDIA_TYPE = "text/event-stream; charset=utf-8"
HEADERS = {"cache-control": "no-cache", "connection": "keep-alive", "x-accel-buffering": "no"}


def event(name: str, data: str) -> bytes:
    """One event; ``data`` never holds a newline here (payloads are compact JSON)."""
    return f"event: {name}\r\ndata: {data}\r\n\r\n".encode()


def ping() -> bytes:
    return f": ping - {dt.datetime.now(dt.UTC)}\r\n\r\n".encode()


def split_payload(payload: str, size: int = CHUNK) -> list[str]:
    """Cut ``payload`` into pieces of at most ``size`` characters, none starting with
    whitespace: the clients ``lstrip()`` every data line and would lose that character."""
    if len(payload) <= size:
        return [payload]
    pieces: list[str] = []
    start = 0
    n = len(payload)
    while n - start > size:
        cut = start + size
        while cut > start + 1 and payload[cut].isspace():
            cut -= 1
        pieces.append(payload[start:cut])
        start = cut
    pieces.append(payload[start:])
    return pieces


def result_events(payload: str) -> bytes:
    """``chunk`` events for all pieces but the last, then ``end``."""
    pieces = split_payload(payload)
    return b"".join(event("chunk", p) for p in pieces[:-1]) + event("end", pieces[-1])


def final_event(frames: bytes) -> tuple[str, str]:
    """The name and data of the result :func:`result_events` (or an ``error`` event) framed:
    the data of its ``chunk`` events and its last event joined, for a door that answers a call
    in another wire format."""
    name, pieces = "", []
    for frame in frames.decode().split("\r\n\r\n"):
        if not frame.startswith("event: "):
            continue
        head, _, data = frame.partition("\r\ndata: ")
        name = head[len("event: ") :]
        pieces.append(data)
    return name, "".join(pieces)
