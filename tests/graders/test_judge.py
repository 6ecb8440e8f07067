"""The LLM judge against a scripted chat-completions server on a real socket."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from envbuilder.graders import Outcome
from envbuilder.graders._judge import LLMJudgeGrader
from tests.fakes.chat_server import ChatServer, completion
from tests.graders._util import make

KEY = "sk-test-SECRET-0123456789"
TASK = {"question": "How many legs do 18 ducks have?", "answer": "36"}


def judge(server: ChatServer, **cfg: Any) -> LLMJudgeGrader:
    block = {
        "type": "llm_judge",
        "base_url": server.base_url,
        "model": "judge-1",
        "question": "{{ question }}",
        "reference": "{{ answer }}",
        "backoff": 0.01,
        **cfg,
    }
    grader = make(block)
    assert isinstance(grader, LLMJudgeGrader)
    return grader


def reply(text: str) -> Any:
    return lambda body, i: (200, completion(text), {})


@pytest.mark.parametrize(
    ("text", "outcome", "score"),
    [
        ("36 legs matches the reference.\nVERDICT: CORRECT", Outcome.CORRECT, 1.0),
        ("Off by two.\nVERDICT: INCORRECT", Outcome.INCORRECT, 0.0),
        ("**Verdict:** correct", Outcome.CORRECT, 1.0),
        ("CORRECT", Outcome.CORRECT, 1.0),
        ("I like ducks.", Outcome.UNGRADEABLE, None),
        ("VERDICT: MAYBE", Outcome.UNGRADEABLE, None),
    ],
)
async def test_verdicts(text: str, outcome: Outcome, score: float | None) -> None:
    with ChatServer(reply(text)) as server:
        g = judge(server)
        result = await g.grade("36", TASK, {})
        await g.aclose()
    assert (result.outcome, result.score) == (outcome, score)
    assert result.details["judge"]["reasoning"] == text
    sent = server.requests[0]
    assert sent["model"] == "judge-1" and sent["temperature"] == 0.0
    prompt = sent["messages"][-1]["content"]
    assert "How many legs" in prompt and "[Reference answer]\n36" in prompt and "[Response]\n36" in prompt


async def test_numeric_score_with_rubric_template() -> None:
    with ChatServer(reply("1. yes\n2. partly\nSCORE: 7")) as server:
        g = judge(
            server,
            template_file="judges/rubric.jinja",
            criteria=["states the number", "shows the working"],
            verdict={"score_range": [0, 10]},
        )
        result = await g.grade("36, because 18*2", TASK, {})
        await g.aclose()
    assert result.outcome is Outcome.CORRECT and result.score == pytest.approx(0.7)
    assert "2. shows the working" in server.requests[0]["messages"][-1]["content"]


async def test_custom_labels_and_pattern() -> None:
    with ChatServer(reply("Grade: [[B]]")) as server:
        g = judge(server, verdict={"labels": {"A": 1, "B": 0.5, "C": 0}, "pattern": r"\[\[([ABC])\]\]"})
        result = await g.grade("36", TASK, {})
        await g.aclose()
    assert result.score == 0.5 and result.details["judge"]["verdict"] == "B"


@pytest.mark.parametrize(
    ("status", "body"),
    [(200, {"not": "a completion"}), (200, completion("   ")), (400, {"error": {"message": "bad"}})],
)
async def test_garbage_and_refusals_are_ungradeable_without_retry(status: int, body: dict[str, Any]) -> None:
    with ChatServer(lambda b, i: (status, body, {})) as server:
        g = judge(server)
        result = await g.grade("36", TASK, {})
        await g.aclose()
    assert result.outcome is Outcome.UNGRADEABLE and result.score is None
    assert len(server.requests) == 1


async def test_429_and_500_are_retried_boundedly_honouring_retry_after() -> None:
    def script(body: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        if i == 0:
            return 429, {"error": "slow down"}, {"Retry-After": "0.2"}
        if i == 1:
            return 500, {"error": "oops"}, {}
        return 200, completion("VERDICT: CORRECT"), {}

    with ChatServer(script) as server:
        g = judge(server, max_retries=3)
        started = time.monotonic()
        result = await g.grade("36", TASK, {})
        elapsed = time.monotonic() - started
        await g.aclose()
    assert result.outcome is Outcome.CORRECT
    assert len(server.requests) == 3 and g.stats.retries == 2
    assert 0.2 <= elapsed < 2


async def test_retries_are_bounded_then_ungradeable() -> None:
    with ChatServer(lambda b, i: (503, {}, {"Retry-After": "3600"})) as server:
        g = judge(server, max_retries=2, max_retry_after=0.05)
        started = time.monotonic()
        result = await g.grade("36", TASK, {})
        await g.aclose()
    assert time.monotonic() - started < 2  # Retry-After: 3600 was cut to 0.05 s
    assert len(server.requests) == 3
    assert result.outcome is Outcome.UNGRADEABLE
    assert result.reason == "the judge is unavailable: HTTP 503 (gave up after 3 tries)"


async def test_slow_judge_times_out() -> None:
    def slow(body: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        time.sleep(0.5)
        return 200, completion("VERDICT: CORRECT"), {}

    with ChatServer(slow) as server:
        g = judge(server, timeout=0.1, max_retries=1)
        result = await g.grade("36", TASK, {})
        await g.aclose()
    assert result.outcome is Outcome.UNGRADEABLE
    assert "no reply within 0.1 s" in result.reason
    assert len(server.requests) == 2


async def test_unreachable_judge_is_ungradeable() -> None:
    with ChatServer(reply("x")) as server:
        url = server.base_url
    g = make({"type": "llm_judge", "base_url": url, "model": "m", "max_retries": 1, "backoff": 0})
    result = await g.grade("36", TASK, {})
    await g.aclose()
    assert result.outcome is Outcome.UNGRADEABLE and "unreachable" in result.reason


async def test_cache_one_call_per_distinct_prompt_across_graders(tmp_path: Any) -> None:
    with ChatServer(reply("VERDICT: CORRECT")) as server:
        first = judge(server)
        a = await first.grade("36", TASK, {})
        b = await first.grade("36", TASK, {})
        c = await first.grade("thirty-six", TASK, {})
        await first.aclose()
        # A new grader (a restarted server) reads the same on-disk cache.
        second = judge(server)
        d = await second.grade("36", TASK, {})
        await second.aclose()
        # Another model is another key.
        other = judge(server, model="judge-2")
        await other.grade("36", TASK, {})
        await other.aclose()
    assert len(server.requests) == 3
    assert first.stats.cache_hits == 1 and second.stats.cache_hits == 1
    assert (a.details["judge"]["cached"], b.details["judge"]["cached"], d.details["judge"]["cached"]) == (
        False,
        True,
        True,
    )
    assert c.outcome is Outcome.CORRECT


async def test_concurrent_identical_prompts_share_one_call() -> None:
    import asyncio

    def slow(body: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        time.sleep(0.1)
        return 200, completion("VERDICT: CORRECT"), {}

    with ChatServer(slow) as server:
        g = judge(server, cache=False)
        results = await asyncio.gather(*(g.grade("36", TASK, {}) for _ in range(5)))
        await g.aclose()
    assert all(r.outcome is Outcome.CORRECT for r in results)
    assert len(server.requests) == 1


async def test_api_key_from_secret_or_env_never_logged_nor_output(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("JUDGE_KEY_FOR_TEST", KEY + "-env")

    def script(body: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        # Providers echo a hint of a bad key in their error body: it must not get through.
        if i < 2:
            return 500, {"error": {"message": f"Incorrect API key provided: {KEY}"}}, {}
        if i == 2:
            return 401, {"error": {"message": f"Incorrect API key provided: {KEY}"}}, {}
        return 200, completion("VERDICT: CORRECT"), {}

    with ChatServer(script) as server:
        g = judge(server, api_key_secret="judge_key", api_key_env="JUDGE_KEY_FOR_TEST", cache=False)
        refused = await g.grade("36", TASK, {"judge_key": KEY})
        ok = await g.grade("36", TASK, {})  # no session secret: the env variable
        await g.aclose()
    auth = [h.get("authorization") for h in server.headers_seen]
    assert auth == [f"Bearer {KEY}"] * 3 + [f"Bearer {KEY}-env"]
    assert refused.outcome is Outcome.UNGRADEABLE and "HTTP 401" in refused.reason
    assert ok.outcome is Outcome.CORRECT
    assert caplog.records, "expected debug logs from the judge and httpx"
    for text in [*(r.getMessage() for r in caplog.records), caplog.text, repr(refused), repr(ok)]:
        assert KEY not in text


def test_key_in_yaml_is_refused() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="api_key"):
        make({"type": "llm_judge", "base_url": "http://x/v1", "model": "m", "api_key": KEY})


async def test_a_null_reference_is_ungradeable_and_the_judge_is_not_asked() -> None:
    with ChatServer(reply("VERDICT: CORRECT")) as server:
        g = judge(server)
        result = await g.grade("None", {**TASK, "answer": None}, {})
        await g.aclose()
    assert (result.outcome, result.reason) == (
        Outcome.UNGRADEABLE,
        "the task has no target: its field `answer` is null",
    )
    assert server.requests == []


async def test_an_unparseable_reply_is_not_cached_a_verdict_is() -> None:
    texts = iter(["I like ducks.", "VERDICT: CORRECT"])
    with ChatServer(lambda body, i: (200, completion(next(texts)), {})) as server:
        g = judge(server)
        first = await g.grade("36", TASK, {})
        second = await g.grade("36", TASK, {})
        third = await g.grade("36", TASK, {})
        await g.aclose()
    assert [r.outcome for r in (first, second, third)] == [
        Outcome.UNGRADEABLE,
        Outcome.CORRECT,
        Outcome.CORRECT,
    ]
    assert (second.details["judge"]["cached"], third.details["judge"]["cached"]) == (False, True)
    assert len(server.requests) == 2
