from __future__ import annotations

from envbuilder.server._sse import event, result_events, split_payload


def test_event_framing() -> None:
    assert event("end", "{}") == b"event: end\r\ndata: {}\r\n\r\n"


def test_split_sizes_match_reference() -> None:
    for size, expected in [
        (4096, [4096]),
        (4097, [4096, 1]),
        (8192, [4096, 4096]),
        (10000, [4096, 4096, 1808]),
    ]:
        assert [len(p) for p in split_payload("a" * size)] == expected


def test_no_piece_starts_with_whitespace() -> None:
    payload = "a" * 4095 + "  \u00a0\u3000b" + "c" * 5000
    pieces = split_payload(payload)
    assert "".join(pieces) == payload
    assert all(len(p) <= 4096 and not p[0].isspace() for p in pieces)


def test_result_events() -> None:
    body = result_events("x" * 4097)
    assert body.count(b"event: chunk") == 1 and body.endswith(b"event: end\r\ndata: x\r\n\r\n")
