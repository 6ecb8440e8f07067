"""Reading what a worker says: bounded JSON checked against the function's return type; anything
else is unreadable with a reason of ours, never an exception and never code."""

from __future__ import annotations

import datetime
import json
import math
import pickle

import pytest
from pydantic import BaseModel, ConfigDict

from envbuilder.isolation.processes._reply import (
    MAX_REPLY_BYTES,
    REFUSALS,
    UNREADABLE,
    Reply,
    encode_error,
    encode_ok,
    encode_refused,
    parse_reply,
)


class Texts(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    texts: list[str]


class Failure(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    message: str


class Stamped(BaseModel):
    at: datetime.date
    tags: frozenset[str]


class AVeryLongExceptionNameThatAWorkerMightUseToPadItsReplyWithTextOfItsOwn(Exception):
    pass


@pytest.mark.parametrize(
    ("data", "schema", "value"),
    [
        (b'{"ok": 1.0}', float, 1.0),
        (b'{"ok": 1}', float, 1.0),  # JSON has one number type
        (b'{"ok": 3}', int, 3),
        (b'{"ok": null}', str | None, None),
        (b'{"ok": "x"}', str | None, "x"),
        (b'{"ok": [null, "a", "b"]}', tuple[bool | None, str, str], (None, "a", "b")),
        (b'{"ok": [true, "a", "b"]}', tuple[bool | None, str, str], (True, "a", "b")),
        (b'{"ok": {"texts": ["a"]}}', Texts | Failure, Texts(texts=["a"])),
        (b'{"ok": {"message": "m"}}', Texts | Failure, Failure(message="m")),
        ('{"ok": "é"}'.encode(), str, "é"),
    ],
)
def test_a_reply_of_the_functions_type_is_its_value(data: bytes, schema: object, value: object) -> None:
    assert parse_reply(data, schema) == Reply("ok", value=value)


def test_inf_and_nan_come_back_as_floats() -> None:
    assert parse_reply(b'{"ok": Infinity}', float).value == math.inf
    assert math.isnan(parse_reply(b'{"ok": NaN}', float).value)


@pytest.mark.parametrize(
    ("data", "schema"),
    [
        (b'{"ok": "1.0"}', float),
        (b'{"ok": true}', float),
        (b'{"ok": 1.5}', int),
        (b'{"ok": [1, 2]}', int),
        (b'{"ok": null}', float),
        (b'{"ok": [0, "a", "b"]}', tuple[bool | None, str, str]),
        (b'{"ok": ["a", "b"]}', tuple[bool | None, str, str]),
        (b'{"ok": {"texts": ["a"], "extra": 1}}', Texts),
        (b'{"ok": {"texts": "a"}}', Texts),
    ],
)
def test_a_value_of_another_type_is_unreadable(data: bytes, schema: object) -> None:
    assert parse_reply(data, schema) == Reply("unreadable", detail="not the expected value")


@pytest.mark.parametrize(
    "data",
    [
        pickle.dumps(("ok", 1.0)),
        b"",
        b"{",
        b"\xff\xfe",
        b'{"ok": 1.0} trailing',
        b"[" * 200_000 + b"]" * 200_000,
    ],
)
def test_what_is_not_json_is_unreadable(data: bytes) -> None:
    assert parse_reply(data, float, limit=1 << 20) == Reply("unreadable", detail="not JSON")


@pytest.mark.parametrize(
    "data",
    [
        b"[]",
        b'"ok"',
        b"1.0",
        b"null",
        b"{}",
        b'{"ok": 1.0, "error": "ValueError"}',
        b'{"ok": 1.0, "reason": "forged"}',
        b'{"error": "ValueError", "refused": "code"}',
        b'{"result": 1.0}',
        b'{"error": 5}',
        b'{"error": null}',
        b'{"refused": ["code"]}',
    ],
)
def test_what_is_not_one_of_the_three_shapes_is_unreadable(data: bytes) -> None:
    assert parse_reply(data, float) == Reply("unreadable", detail="not a reply")


def test_a_reply_longer_than_its_bound_is_unreadable() -> None:
    data = json.dumps({"ok": "x" * 100}).encode()
    assert parse_reply(data, str, limit=len(data)) == Reply("ok", value="x" * 100)
    assert parse_reply(data, str, limit=len(data) - 1) == Reply("unreadable", detail="too long")
    big = json.dumps({"ok": "x" * MAX_REPLY_BYTES}).encode()
    assert parse_reply(big, str) == Reply("unreadable", detail="too long")
    exact = b'{"ok":"' + b"y" * (MAX_REPLY_BYTES - 9) + b'"}'
    assert len(exact) == MAX_REPLY_BYTES and parse_reply(exact, str).kind == "ok"


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("ValueError", "ValueError"),
        ("ZeroDivisionError", "ZeroDivisionError"),
        ("MemoryError", "MemoryError"),
        ("KeyboardInterrupt", "KeyboardInterrupt"),
        ("Exception", "Exception"),
        ("Pwned", "Exception"),
        ("the grade is 1.0", "Exception"),
        ("print", "Exception"),  # a builtin, not an exception
        ("object", "Exception"),
        ("", "Exception"),
        ("ValueError" * 10, "Exception"),
    ],
)
def test_an_error_keeps_only_a_builtin_exceptions_name(name: str, shown: str) -> None:
    assert parse_reply(json.dumps({"error": name}).encode(), float) == Reply("raised", detail=shown)


@pytest.mark.parametrize("what", sorted(REFUSALS))
def test_a_refusal_keeps_its_kind(what: str) -> None:
    assert parse_reply(encode_refused(what), float) == Reply("refused", detail=what)


@pytest.mark.parametrize("what", ["pwned", "", "Code", "code ", "anything the answer wants"])
def test_a_refusal_of_an_unknown_kind_is_code(what: str) -> None:
    assert parse_reply(json.dumps({"refused": what}).encode(), float) == Reply("refused", detail="code")


def test_what_a_worker_encodes_reads_back() -> None:
    assert parse_reply(encode_ok(0.5), float) == Reply("ok", value=0.5)
    assert parse_reply(encode_ok((None, "a", "é")), tuple[bool | None, str, str]).value == (None, "a", "é")
    assert parse_reply(encode_ok(Texts(texts=["a"])), Texts | Failure).value == Texts(texts=["a"])
    assert parse_reply(encode_ok(math.inf), float).value == math.inf
    assert encode_ok("é") == '{"ok":"é"}'.encode()  # UTF-8, not escapes: the bound is in bytes
    assert parse_reply(encode_error(ZeroDivisionError("1/0")), float) == Reply(
        "raised", detail="ZeroDivisionError"
    )
    assert encode_error(ValueError("secret text")) == b'{"error": "ValueError"}'
    with pytest.raises(TypeError, match=r"^object is not JSON$"):
        encode_ok(object())
    # A model is sent as its JSON form (a date as ISO text, a set as a list).
    stamped = json.loads(encode_ok(Stamped(at=datetime.date(2026, 12, 1), tags=frozenset({"a"}))))
    assert stamped == {"ok": {"at": "2026-12-01", "tags": ["a"]}}
    long = json.loads(encode_error(AVeryLongExceptionNameThatAWorkerMightUseToPadItsReplyWithTextOfItsOwn()))
    assert long == {
        "error": AVeryLongExceptionNameThatAWorkerMightUseToPadItsReplyWithTextOfItsOwn.__name__[:64]
    }


def test_the_vocabularies_are_ours() -> None:
    assert {"too long", "not JSON", "not a reply", "not the expected value"} == UNREADABLE
    assert {"code", "import", "process", "file", "network", "memory", "introspection"} == REFUSALS
