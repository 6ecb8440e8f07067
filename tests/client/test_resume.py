"""Dropped connections, retries and their bounds, with a scripted transport."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from envbuilder.client import (
    AsyncClient,
    EpisodeFinished,
    InputValidation,
    NotFound,
    RetryPolicy,
    ServerError,
    SessionGone,
    ToolFailed,
    ToolInputInvalid,
    ToolNotFound,
    TransportError,
)
from envbuilder.client._errors import tool_call_error

OK = {
    "ok": True,
    "output": {
        "blocks": [{"type": "text", "text": "done"}],
        "metadata": None,
        "reward": 1.0,
        "finished": True,
    },
}


class _Broken(httpx.AsyncByteStream):
    """Sends ``data`` and then drops the connection."""

    def __init__(self, data: bytes):
        self.data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.data
        raise httpx.ReadError("connection reset")


def _sse(*events: tuple[str, str]) -> bytes:
    return b"".join(f"event: {n}\r\ndata: {d}\r\n\r\n".encode() for n, d in events)


def _client(on_call: Callable[[dict, int], httpx.Response], retries: int = 3):
    calls: list[dict] = []
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        path = request.url.path
        if path == "/create_session":
            return httpx.Response(
                200,
                content=_sse(("task_id", "sid-1"), ("end", "")),
                headers={"content-type": "text/event-stream"},
            )
        if path in ("/create", "/ping", "/delete", "/delete_session"):
            return httpx.Response(200, json={"sid": "sid-1"})
        if path == "/list_environments":
            return httpx.Response(200, json=["mathenv"])
        if path.endswith("/call"):
            body = json.loads(request.content)
            calls.append(body)
            return on_call(body, len(calls) - 1)
        return httpx.Response(404, json={"detail": "Not Found"})

    client = AsyncClient(
        "http://test",
        transport=httpx.MockTransport(handler),
        retry=RetryPolicy(max_retries=retries, backoff=0.001),
        ping_interval=60,
    )
    return client, calls, seen


def _stream(body: bytes) -> httpx.Response:
    return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})


async def test_drop_after_task_id_resumes_with_the_task_id() -> None:
    def on_call(body: dict, n: int) -> httpx.Response:
        if n == 0:
            return httpx.Response(
                200, stream=_Broken(_sse(("task_id", "T1"))), headers={"content-type": "text/event-stream"}
            )
        payload = json.dumps(OK)
        return _stream(_sse(("task_id", "T1"), ("chunk", payload[:10]), ("end", payload[10:])))

    client, calls, _ = _client(on_call)
    async with client, client.environment().session(split="train", index=0) as s:
        out = await s.call_tool("submit", {"answer": "4"})
    assert out.reward == 1.0 and out.finished
    assert calls == [
        {"name": "submit", "input": {"answer": "4"}},
        {"name": "submit", "input": {"answer": "4"}, "task_id": "T1"},
    ]


async def test_a_stream_without_end_is_retried_a_bounded_number_of_times() -> None:
    client, calls, _ = _client(lambda body, n: _stream(_sse(("task_id", "T"))), retries=2)
    async with client, client.environment().session(split="train", index=0) as s:
        with pytest.raises(TransportError, match="stream broke off"):
            await s.call_tool("submit", {"answer": "4"})
    assert len(calls) == 3  # never reset by the 200s: one try plus two retries
    assert [c.get("task_id") for c in calls] == [None, "T", "T"]


async def test_result_gone_after_resume_is_a_clear_tool_failure() -> None:
    def on_call(body: dict, n: int) -> httpx.Response:
        if n == 0:
            return httpx.Response(200, stream=_Broken(_sse(("task_id", "T1"))))
        return _stream(_sse(("error", "unknown task_id")))

    client, _, _ = _client(on_call)
    async with client, client.environment().session(split="train", index=0) as s:
        with pytest.raises(ToolFailed, match="no longer holds its result"):
            await s.call_tool("x")


@pytest.mark.parametrize(
    ("status", "detail", "error", "tries"),
    [
        (400, "Invalid split", NotFound, 1),
        (404, "Active environment not found", SessionGone, 1),
        (410, "Session deleted", SessionGone, 1),
        (422, "bad", InputValidation, 1),
        (500, "KeyError: 'x'", ServerError, 1),
        (503, "starting", ServerError, 4),
        (429, "slow", Exception, 4),
        (408, "timeout", Exception, 4),
    ],
)
async def test_4xx_are_not_retried_except_408_and_429(status, detail, error, tries) -> None:
    client, calls, _ = _client(
        lambda body, n: httpx.Response(status, json={"detail": detail}, headers={"retry-after": "0"})
    )
    async with client, client.environment().session(split="train", index=0) as s:
        with pytest.raises(error) as info:
            await s.call_tool("submit", {"answer": "4"})
    assert info.value.status == status and info.value.detail == detail
    assert len(calls) == tries


async def test_a_retry_that_then_succeeds() -> None:
    def on_call(body: dict, n: int) -> httpx.Response:
        if n < 2:
            return httpx.Response(
                503,
                json={"detail": "Environment still starting."},
                headers={"retry-after": "0", "x-backend-state": "starting"},
            )
        return _stream(_sse(("task_id", "T"), ("end", json.dumps(OK))))

    client, calls, _ = _client(on_call)
    async with client, client.environment().session(split="train", index=0) as s:
        assert (await s.call_tool("submit", {})).reward == 1.0
    assert len(calls) == 3


@pytest.mark.parametrize(
    ("result", "error", "reason"),
    [
        ({"ok": False, "error": "'x' is not a valid tool"}, ToolNotFound, "not_found"),
        ({"ok": False, "error": "Tool input validation error: [...]"}, ToolInputInvalid, "input_validation"),
    ],
)
async def test_tool_errors_are_typed_with_or_without_reason(result, error, reason) -> None:
    client, _, _ = _client(lambda body, n: _stream(_sse(("task_id", "T"), ("end", json.dumps(result)))))
    async with client, client.environment().session(split="train", index=0) as s:
        with pytest.raises(error) as info:
            await s.call_tool("x")
    assert info.value.reason == reason


@pytest.mark.parametrize(
    "result",
    [
        {"ok": False, "error": "anything", "reason": "episode_finished"},
        {"ok": False, "error": "'x' was not run: the episode has finished (a tool returned ...)"},
    ],
)
async def test_a_finished_episode_is_a_state_with_or_without_reason(result) -> None:
    client, calls, _ = _client(lambda body, n: _stream(_sse(("task_id", "T"), ("end", json.dumps(result)))))
    async with client, client.environment().session(split="train", index=0) as s:
        out = await s.call_tool("x")
        assert s.finished and (out.finished, out.reward) == (True, None)
        assert isinstance(tool_call_error(result["error"], result.get("reason")), EpisodeFinished)
        await s.call_tool("x")  # answered by the session: not sent again
    assert len(calls) == 1


async def test_session_is_deleted_on_exit_even_after_an_error() -> None:
    client, _, seen = _client(lambda body, n: _stream(_sse(("error", "kaboom"))))
    async with client:
        with pytest.raises(ToolFailed, match="kaboom"):
            async with client.environment().session(split="train", index=0) as s:
                await s.call_tool("boom")
    assert seen[-2:] == ["/delete", "/delete_session"]
    assert seen[:4] == ["/list_environments", "/create_session", "/create", "/ping"]


async def test_spec_style_json_create_session_is_accepted() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/create_session":
            return httpx.Response(200, json={"sid": "json-sid"})
        return httpx.Response(200, json={"sid": request.headers.get("x-session-id")})

    client = AsyncClient("http://t", transport=httpx.MockTransport(handler))
    async with client, client.environment("e").session(split="s", index=0) as s:
        assert s.sid == "json-sid"
