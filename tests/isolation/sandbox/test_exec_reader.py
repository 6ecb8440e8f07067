"""How a session container's exec stream is read: the command's output on each stream up to the
wrapper's end lines, whatever order the engine forwards the two pipes in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from envbuilder.isolation.sandbox._containers import _ExecReader
from envbuilder.isolation.sandbox._engine import STDERR, STDOUT
from envbuilder.isolation.sandbox._process import Output

NONCE = "n0nce"


class Frames:
    def __init__(self, *frames: tuple[int, bytes]):
        self._frames = frames
        self.read = 0

    async def frames(self) -> AsyncIterator[tuple[int, bytes]]:
        for frame in self._frames:
            self.read += 1
            yield frame


def _read(*frames: tuple[int, bytes]) -> tuple[_ExecReader, Output, Frames]:
    output = Output(1 << 20)
    reader = _ExecReader(NONCE, output)
    stream = Frames(*frames)
    asyncio.run(reader.pump(stream))
    return reader, output, stream


def test_stderr_that_arrives_after_stdouts_end_line_is_kept() -> None:
    # The engine reads the two pipes apart: stdout's end line first, the traceback after it.
    reader, output, _ = _read(
        (STDOUT, b"n0nce:pid 42\n"),
        (STDOUT, b"partial\nn0nce:end 1\n"),
        (STDERR, b"PermissionError: [Errno 13] Permission denied: '/etc/shadow'\n"),
        (STDERR, b"\nn0nce:end 1\n"),
    )
    assert (reader.pid, reader.end) == (42, 1)
    assert bytes(output.out) == b"partial"
    assert bytes(output.err) == b"PermissionError: [Errno 13] Permission denied: '/etc/shadow'\n"


def test_the_call_ends_at_both_end_lines_not_at_the_streams_close() -> None:
    # A background process keeps the stream open: what follows both end lines is never waited for.
    reader, output, stream = _read(
        (STDOUT, b"n0nce:pid 7\nok\n"),
        (STDERR, b"warn\n\nn0nce:end 0\n"),
        (STDOUT, b"\nn0nce:end 0\n"),
        (STDOUT, b"from the background\n"),
    )
    assert reader.end == 0 and stream.read == 3
    assert (bytes(output.out), bytes(output.err)) == (b"ok\n", b"warn\n")


def test_a_stream_closed_before_its_end_lines_keeps_what_came() -> None:
    reader, output, _ = _read((STDOUT, b"n0nce:pid 7\nhalf"), (STDERR, b"err"))
    assert reader.end is None
    assert (bytes(output.out), bytes(output.err)) == (b"half", b"err")
