"""Reading an HTTP ``Retry-After`` header, for every outgoing client (ORS client, judge, eval)."""

from __future__ import annotations

import email.utils
import time

__all__ = ["parse_retry_after"]


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: a number of seconds or an HTTP date; None if absent or bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
