"""The SSE parser follows the spec where the reference clients do not."""

from __future__ import annotations

import pytest

from envbuilder.client import ClientError, ToolFailed
from envbuilder.client._sse import Event, EventParser, LineSplitter, ResultReader


def _events(raw: bytes, pieces: int = 1) -> list[Event]:
    lines, parser, out = LineSplitter(), EventParser(), []
    step = max(1, len(raw) // pieces)
    chunks = [raw[i : i + step] for i in range(0, len(raw), step)]
    for chunk in [*chunks, None]:
        for line in lines.feed(chunk) if chunk is not None else lines.close():
            event = parser.feed(line)
            if event is not None:
                out.append(event)
    return out


@pytest.mark.parametrize("pieces", [1, 3, 7, 1000])
def test_crlf_lf_and_cr_terminators_and_any_chunking(pieces: int) -> None:
    raw = (
        b"event: task_id\r\ndata: abc\r\n\r\n: ping - 2026\r\n\r\n"
        b'event: chunk\ndata: {"a": \n\nevent: end\rdata: 1}\r\r'
    )
    assert _events(raw, pieces) == [Event("task_id", "abc"), Event("chunk", '{"a": '), Event("end", "1}")]


def test_only_one_leading_space_is_stripped() -> None:
    # The reference clients lstrip() and would read "x" here.
    assert _events(b"event: end\ndata:   x\n\n") == [Event("end", "  x")]
    assert _events(b"event:end\ndata:x\n\n") == [Event("end", "x")]


def test_unicode_line_separators_are_data_not_line_breaks() -> None:
    text = 'event: end\ndata: {"t": "a\u2028b\u0085c\x0cd"}\n\n'
    assert _events(text.encode(), pieces=5) == [Event("end", '{"t": "a\u2028b\u0085c\x0cd"}')]


def test_multi_byte_utf8_split_across_chunks() -> None:
    raw = 'event: end\ndata: "日本語"\n\n'.encode()
    assert _events(raw, pieces=len(raw)) == [Event("end", '"日本語"')]


def test_multiline_data_joins_with_newline_and_colonless_line_is_a_field() -> None:
    assert _events(b"event: x\ndata: a\ndata: b\ndata\n\n") == [Event("x", "a\nb\n")]
    assert _events(b"data: only data\n\n") == [Event("message", "only data")]
    assert _events(b"event: unfinished\ndata: 1") == []  # no blank line: never dispatched


def test_result_reader_joins_chunks_and_raises_on_error() -> None:
    reader = ResultReader()
    for event in _events(
        b'event: task_id\ndata: t1\n\nevent: chunk\ndata: {"ok":\n\n'
        b"event: chunk\ndata:  true\n\nevent: end\ndata: }\n\n"
    ):
        reader.on_event(event)
    assert (reader.task_id, reader.done, reader.result) == ("t1", True, {"ok": True})
    with pytest.raises(ToolFailed, match="kaboom"):
        ResultReader().on_event(Event("error", "kaboom"))
    with pytest.raises(ClientError, match="not valid JSON"):
        ResultReader().on_event(Event("end", "{nope"))
    empty = ResultReader()
    empty.on_event(Event("end", ""))
    assert empty.done and empty.result is None
