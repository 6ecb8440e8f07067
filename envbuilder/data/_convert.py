"""Python values decoded from Arrow → JSON values, faithfully (dates, decimals, bytes, nesting)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
from typing import Any


def to_json(value: Any) -> Any:
    """A JSON-serialisable copy of ``value`` (only converts what JSON cannot hold)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return str(value)


def needs_conversion(row: dict[str, Any]) -> bool:
    """Cheap check: does any top-level value need :func:`to_json`?"""
    return any(not (v is None or isinstance(v, str | int | bool)) for v in row.values())
