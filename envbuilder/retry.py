"""The one retry policy of every outgoing HTTP call: the ORS client, the judge and the eval model.

* **What retries**: a transport failure (unreachable, timeout, dropped connection) and the
  statuses in :data:`RETRY_STATUSES` — 408, 429 and the 5xx that say the request was not
  processed (502, 503, 504, 529 "overloaded"). A 500 may mean the request ran and then failed,
  so it retries only when repeating the request is harmless (``repeat_safe``: a chat
  completion yes, an ORS tool call no). Every other status fails at once.
* **How long to wait**: ``Retry-After`` when the server sends one, capped at
  ``max_retry_after``; otherwise exponential backoff with jitter, ``backoff`` · 2ⁿ⁻¹ scaled by a
  random factor in [0.5, 1] (so clients that failed together do not retry together), capped at
  ``max_backoff``.
* **How often**: at most ``max_retries`` retries; the attempt counter never resets. A
  timeout retries at most ``max_timeout_retries`` times of those (None: as any failure): each
  try of a timed-out request costs the whole timeout, so against a hung endpoint six tries of a
  300 s request are half an hour, and a request that timed out twice in a row rarely answers on
  a third (the endpoint is stuck, or the request needs more than the timeout allows).
* **What the caller sees** when it gives up: the last failure's reason and the number of tries
  (:meth:`Attempts.gave_up`).

Callers keep their own error types; they drive the policy through :class:`Attempts`::

    attempts = policy.attempts()
    while True:
        ...                                   # one try; on failure:
        if not await attempts.retry(reason, retry_after_header):
            raise SomeError(attempts.gave_up())
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from dataclasses import dataclass

__all__ = ["RETRY_STATUSES", "Attempts", "RetryPolicy", "parse_retry_after"]

#: Statuses retried whatever the request (it was not processed, or the server asked to wait).
RETRY_STATUSES = frozenset({408, 429, 502, 503, 504, 529})


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: a number of seconds or an HTTP date; None if absent or bad."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if seconds == seconds else None  # NaN is not a wait
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True)
class RetryPolicy:
    """Which failures retry, how long to wait, how many times (see the module docstring)."""

    max_retries: int = 3
    """Retries after the first try (0: never retry)."""
    backoff: float = 0.5
    """Seconds before the first retry (before jitter); doubled each time."""
    max_backoff: float = 30.0
    """The longest computed wait."""
    max_retry_after: float = 60.0
    """The longest ``Retry-After`` honoured (a longer one is cut to this)."""
    repeat_safe: bool = False
    """Repeating the request is harmless, so a 500 is retried too."""
    max_timeout_retries: int | None = None
    """Of the retries, the most after a timeout (None: as many as ``max_retries``)."""

    def retryable(self, status: int) -> bool:
        """Whether an HTTP answer with ``status`` is worth another try."""
        return status in RETRY_STATUSES or (self.repeat_safe and status == 500)

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        hinted = parse_retry_after(retry_after)
        if hinted is not None:
            return min(hinted, self.max_retry_after)
        return min(self.max_backoff, self.backoff * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)

    def attempts(self) -> Attempts:
        """A fresh counter for one request."""
        return Attempts(self)


class Attempts:
    """The tries of one request under a policy: counts them, waits, remembers the last reason."""

    def __init__(self, policy: RetryPolicy):
        self.policy = policy
        self.tries = 0
        """Tries that failed so far."""
        self.reason = ""
        """The last failure's reason."""
        self.timeouts = 0
        """Tries that timed out so far."""
        self._retried = 0

    async def retry(self, reason: str, retry_after: str | None = None, *, timeout: bool = False) -> bool:
        """Record a failed try (``timeout``: it timed out); wait and return True when another is
        allowed, else False."""
        allowed = self.allows(timeout=timeout)
        self.tries += 1
        self.reason = reason
        self.timeouts += timeout
        if not allowed:
            return False
        self._retried += 1
        await asyncio.sleep(self.policy.delay(self.tries, retry_after))
        return True

    def allows(self, *, timeout: bool = False) -> bool:
        """Whether the failure of the try under way (``timeout``: it timed out) gets a retry."""
        if self.tries >= self.policy.max_retries:
            return False
        limit = self.policy.max_timeout_retries
        return not (timeout and limit is not None and self.timeouts >= limit)

    @property
    def retries(self) -> int:
        """Retries made (tries after the first)."""
        return self._retried

    def gave_up(self) -> str:
        """The last reason and how many tries it took, for the error the caller raises."""
        tries = "1 try" if self.tries == 1 else f"{self.tries} tries"
        return f"{self.reason} (gave up after {tries})"
