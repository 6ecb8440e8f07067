"""The one retry policy: which statuses retry, how long it waits, when it gives up."""

from __future__ import annotations

import asyncio
import email.utils
import time

import pytest

from envbuilder.retry import RETRY_STATUSES, RetryPolicy, parse_retry_after


def test_which_statuses_retry() -> None:
    assert sorted(RETRY_STATUSES) == [408, 429, 502, 503, 504, 529]
    safe, unsafe = RetryPolicy(repeat_safe=True), RetryPolicy()
    statuses = (400, 401, 404, 408, 409, 422, 429, 500, 501, 502, 503, 504, 529)
    assert [s for s in statuses if safe.retryable(s)] == [408, 429, 500, 502, 503, 504, 529]
    assert not unsafe.retryable(500) and unsafe.retryable(503)


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    policy = RetryPolicy(max_retry_after=5.0)
    assert policy.delay(1, "2") == 2.0
    assert policy.delay(1, "3600") == 5.0
    date = email.utils.formatdate(time.time() + 3, usegmt=True)
    assert 1.0 < policy.delay(1, date) <= 3.0
    assert (
        parse_retry_after("soon") is None
        and parse_retry_after("-3") == 0.0
        and parse_retry_after("nan") is None
    )


def test_backoff_is_exponential_with_jitter_and_capped() -> None:
    policy = RetryPolicy(backoff=1.0, max_backoff=6.0)
    for attempt, base in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 6.0), (9, 6.0)]:
        delays = {policy.delay(attempt) for _ in range(200)}
        assert all(base / 2 <= d <= base for d in delays)
        assert len(delays) > 100  # jittered: clients that failed together spread out


def test_attempts_are_bounded_and_name_the_last_reason() -> None:
    async def main() -> tuple[list[bool], str, int]:
        attempts = RetryPolicy(max_retries=2, backoff=0.001).attempts()
        verdicts = [await attempts.retry(reason) for reason in ("HTTP 503", "HTTP 502", "unreachable")]
        return verdicts, attempts.gave_up(), attempts.retries

    verdicts, message, retries = asyncio.run(main())
    assert verdicts == [True, True, False]
    assert message == "unreachable (gave up after 3 tries)" and retries == 2


@pytest.mark.parametrize("max_retries", [0, 1])
def test_no_retries_means_one_try(max_retries: int) -> None:
    async def main() -> str:
        attempts = RetryPolicy(max_retries=max_retries, backoff=0.001).attempts()
        while await attempts.retry("HTTP 429"):
            pass
        return attempts.gave_up()

    assert (
        asyncio.run(main())
        == f"HTTP 429 (gave up after {max_retries + 1} tr{'y' if max_retries == 0 else 'ies'})"
    )


async def test_a_timeout_retries_at_most_max_timeout_retries_times() -> None:
    policy = RetryPolicy(max_retries=5, backoff=0.0, max_timeout_retries=1)
    attempts = policy.attempts()
    assert attempts.allows(timeout=True)
    assert await attempts.retry("timeout (ReadTimeout)", timeout=True)
    assert not attempts.allows(timeout=True) and attempts.allows()  # other failures go on
    assert await attempts.retry("HTTP 503")
    assert not await attempts.retry("timeout (ReadTimeout)", timeout=True)
    assert (attempts.tries, attempts.retries) == (3, 2)
    assert attempts.gave_up() == "timeout (ReadTimeout) (gave up after 3 tries)"
    unlimited = RetryPolicy(max_retries=2, backoff=0.0).attempts()  # None: as any failure
    assert [await unlimited.retry("timeout", timeout=True) for _ in range(3)] == [True, True, False]
