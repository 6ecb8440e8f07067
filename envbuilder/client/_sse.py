"""A Server-Sent Events parser that follows the WHATWG rules, and the ORS reading of a stream.

Unlike both reference clients, a field value loses exactly ONE leading space (``data:  x`` is
`` x``), a line without a colon is a field with an empty value (not an error), and several
``data:`` lines of one event join with newlines.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field

import orjson

from envbuilder.client._errors import ClientError, ToolFailed

__all__ = ["Event", "EventParser", "LineSplitter", "ResultReader"]


class LineSplitter:
    """Bytes in, lines out, split ONLY at CRLF, LF or CR as the SSE spec says.

    (``httpx``'s ``aiter_lines`` uses ``str.splitlines``, which also splits at U+2028,
    U+0085, form feeds …: characters JSON may carry raw inside a ``data:`` line.)
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""

    def feed(self, data: bytes) -> list[str]:
        text = self._buffer + self._decoder.decode(data)
        lines: list[str] = []
        start = 0
        n = len(text)
        while True:
            cr = text.find("\r", start)
            lf = text.find("\n", start)
            if cr < 0 and lf < 0:
                break
            if cr < 0 or (0 <= lf < cr):
                lines.append(text[start:lf])
                start = lf + 1
            elif cr == n - 1:
                break  # a CR at the end may be the first half of a CRLF: wait for more
            else:
                lines.append(text[start:cr])
                start = cr + 2 if text[cr + 1] == "\n" else cr + 1
        self._buffer = text[start:]
        return lines

    def close(self) -> list[str]:
        """Lines left at the end of the stream (a trailing CR ends a line)."""
        rest = self._buffer + self._decoder.decode(b"", final=True)
        self._buffer = ""
        if rest.endswith("\r"):
            return [rest[:-1]]
        return []  # an unterminated last line is incomplete


@dataclass(frozen=True)
class Event:
    name: str
    data: str


class EventParser:
    """Feed decoded lines (without their line terminator); get events at blank lines."""

    def __init__(self) -> None:
        self._name = ""
        self._data: list[str] = []
        self._seen = False

    def feed(self, line: str) -> Event | None:
        if not line:
            if not self._seen:
                return None
            event = Event(self._name or "message", "\n".join(self._data))
            self._name, self._data, self._seen = "", [], False
            return event
        if line.startswith(":"):
            return None  # a comment: keep-alive pings
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._name = value
            self._seen = True
        elif name == "data":
            self._data.append(value)
            self._seen = True
        # "id" and "retry" carry nothing ORS uses; unknown fields are ignored by the spec.
        return None


@dataclass
class ResultReader:
    """Reads an ORS result stream: ``task_id``, then ``chunk``s and ``end`` (or ``error``).

    ``done`` turns true at ``end``; ``result`` is the JSON of the joined chunks (``None`` for
    an empty ``end``, as ``/create_session`` sends). An ``error`` event raises ToolFailed.
    """

    task_id: str | None = None
    done: bool = False
    result: object = None
    end_data: str = ""
    _chunks: list[str] = field(default_factory=list)

    def on_event(self, event: Event) -> None:
        if event.name == "task_id":
            self.task_id = event.data
        elif event.name == "chunk":
            self._chunks.append(event.data)
        elif event.name == "end":
            text = "".join([*self._chunks, event.data])
            self.end_data = text
            try:
                self.result = orjson.loads(text) if text else None
            except orjson.JSONDecodeError as exc:
                raise ClientError(f"the server's result is not valid JSON ({exc})") from None
            self.done = True
        elif event.name == "error":
            raise ToolFailed(event.data or "the tool failed on the server")
