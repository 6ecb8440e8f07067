"""What a worker process says back, read as data: one length-bounded JSON object checked against
its function's return type, never code.

A worker that ran untrusted input (an answer SymPy evaluates, a client's task) may have been
taken over by it, so everything it writes is treated as hostile: it is never unpickled, never
shown as text it chose, and a reply that does not fit the schema is no reply at all. A reply is
exactly one of::

    {"ok": VALUE}          the function's result; VALUE must validate (strictly) against the
                           function's return annotation
    {"error": "NAME"}      the function raised; only the exception's class name travels, and it
                           is kept only when it names one of Python's built-in exceptions
    {"refused": "WHAT"}    the answer tried to run code and the guard (``_guard``) refused it;
                           WHAT is one of :data:`REFUSALS`

:func:`parse_reply` turns the bytes into one tagged :class:`Reply` and never raises: what cannot
be read is ``unreadable`` with a reason from :data:`UNREADABLE`, so the caller makes that one
answer ungradeable and nothing else.
"""

from __future__ import annotations

import builtins
import functools
import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model

__all__ = [
    "MAX_REPLY_BYTES",
    "REFUSALS",
    "UNREADABLE",
    "Reply",
    "encode_error",
    "encode_ok",
    "encode_refused",
    "parse_reply",
]

MAX_REPLY_BYTES = 64 << 10
"""Default bound on one reply (a score, a short verdict); a function may declare its own."""

REFUSALS = frozenset({"code", "import", "process", "file", "network", "memory", "introspection"})
"""What the guard refuses, by kind (``_guard``): the only words a ``refused`` reply may carry."""

UNREADABLE = frozenset({"too long", "not JSON", "not a reply", "not the expected value"})
"""Why a reply could not be read: the only reasons an ``unreadable`` reply gives."""

_BUILTIN_ERRORS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)


@dataclass(frozen=True, slots=True)
class Reply:
    """A worker's reply, read."""

    kind: Literal["ok", "raised", "refused", "unreadable"]
    value: Any = None
    """The function's result (``ok`` only), validated against its return type."""
    detail: str = ""
    """``raised``: a built-in exception's name, else ``Exception``; ``refused``: one of
    :data:`REFUSALS`; ``unreadable``: one of :data:`UNREADABLE`."""


class _Raised(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    error: str


class _Refused(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    refused: str


_OTHER: TypeAdapter[_Raised | _Refused] = TypeAdapter(_Raised | _Refused)


@functools.lru_cache(maxsize=256)
def _ok_model(schema: Any) -> TypeAdapter[Any]:
    """``{"ok": <schema>}``, strict and closed (built on first use: it costs at import)."""
    model = create_model(
        "_Ok",
        __config__=ConfigDict(extra="forbid", strict=True),
        ok=(schema, ...),
    )
    return TypeAdapter(model)


def parse_reply(data: bytes, schema: Any, limit: int = MAX_REPLY_BYTES) -> Reply:
    """Read ``data`` (one frame from a worker) as a reply whose value is of type ``schema``.

    Never raises: a reply longer than ``limit`` bytes, not JSON, not one of the three shapes, or
    whose value does not validate against ``schema`` is ``Reply("unreadable", detail=why)``.
    """
    if len(data) > limit:
        return Reply("unreadable", detail="too long")
    try:
        shape = json.loads(data)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return Reply("unreadable", detail="not JSON")
    if not isinstance(shape, dict) or len(shape) != 1:
        return Reply("unreadable", detail="not a reply")
    if "ok" in shape:
        try:
            return Reply("ok", value=_ok_model(schema).validate_json(data).ok)
        except (ValidationError, RecursionError):
            return Reply("unreadable", detail="not the expected value")
    try:
        other = _OTHER.validate_python(shape)
    except ValidationError:
        return Reply("unreadable", detail="not a reply")
    if isinstance(other, _Raised):
        return Reply("raised", detail=other.error if other.error in _BUILTIN_ERRORS else "Exception")
    return Reply("refused", detail=other.refused if other.refused in REFUSALS else "code")


def encode_ok(value: Any) -> bytes:
    """The worker's reply carrying ``value`` (tuples as arrays, pydantic models as objects;
    inf and nan as JSON5 words, which :func:`parse_reply` reads back)."""
    return json.dumps({"ok": value}, separators=(",", ":"), ensure_ascii=False, default=_plain).encode()


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON")


def encode_error(exc: BaseException) -> bytes:
    """The worker's reply for a function that raised ``exc``: its class name only."""
    return json.dumps({"error": type(exc).__name__[:64]}).encode()


def encode_refused(what: str) -> bytes:
    """The worker's reply when the guard refused ``what`` (one of :data:`REFUSALS`)."""
    return json.dumps({"refused": what}).encode()
