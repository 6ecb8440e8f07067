"""HTTP with a bounded retry policy, JSON requests and ORS result streams (SSE).

Retries follow the one policy of :mod:`envbuilder.retry` (not ``repeat_safe``: a 500 on a
tool call may mean the tool ran, so it fails at once with a typed error). The attempt counter
never resets: a server that keeps answering 200 with a stream that lacks ``end`` gets
``max_retries`` more tries, then a TransportError.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from envbuilder._version import __version__
from envbuilder.client._errors import ClientError, ResponseError, ToolFailed, TransportError, response_error
from envbuilder.client._sse import EventParser, LineSplitter, ResultReader
from envbuilder.httppool import PoolTransport
from envbuilder.retry import RetryPolicy

__all__ = ["Http"]

#: The client's default: an ORS server is usually close, so waits stay short.
DEFAULT_RETRY = RetryPolicy(max_retries=3, backoff=0.5, max_backoff=10.0)

#: Connections one client opens to its server at most (all kept alive for reuse).
DEFAULT_MAX_CONNECTIONS = 100

#: Seconds an idle connection is kept (httpx: 5). A connection the server closed first is
#: noticed on reuse and replaced, so a longer expiry costs nothing; a shorter one reconnects a
#: busy pool whenever its event loop stalls for a few seconds (a loaded trainer host).
KEEPALIVE_EXPIRY = 60.0


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if isinstance(body, dict) and "detail" in body:
        detail = body["detail"]
        return detail if isinstance(detail, str) else orjson.dumps(detail).decode()
    return response.text[:500]


class _Dropped(Exception):
    """The stream ended before its ``end`` event."""


class Http:
    """One connection pool to one ORS server.

    At most ``max_connections`` connections, all kept alive; the requests past that wait for one
    in arrival order, without a deadline (the caller chose how many to put in flight), in
    :class:`~envbuilder.httppool.PoolTransport`, whose cost per request does not grow with the
    queue (httpx's own pool costs the square of it: 1,024 in flight did not finish in 125 s).
    A ``transport`` given instead (tests, an ASGI app in process) is used as it is.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        sse_read_timeout: float = 45.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ):
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {max_connections}")
        headers = {"user-agent": f"envbuilder/{__version__}"}
        if api_key:
            headers["x-api-key"] = api_key
        self.base_url = base_url.rstrip("/")
        self.retry = retry or DEFAULT_RETRY
        # Servers ping every 10 s during a long tool call: a silent stream is a dead one.
        self._sse_timeout = httpx.Timeout(timeout, read=sse_read_timeout, pool=None)
        self.max_connections = max_connections
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(timeout, pool=None),
            follow_redirects=True,  # 308 to the default environment keeps method and body
            transport=transport
            or PoolTransport(max_connections=max_connections, keepalive_expiry=KEEPALIVE_EXPIRY),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    def _error(self, response: httpx.Response, path: str, session_route: bool) -> ResponseError:
        return response_error(
            response.status_code,
            _detail(response),
            path=path,
            session_route=session_route,
            retry_after=response.headers.get("retry-after"),
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        sid: str | None = None,
        session_route: bool = False,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """A JSON request; the decoded JSON answer. Retries within the policy."""
        headers = {**(headers or {}), **({"x-session-id": sid} if sid else {})}
        attempts = self.retry.attempts()
        while True:
            retry_after = None
            try:
                response = await self._client.request(method, path, json=json, headers=headers)
            except httpx.TransportError as exc:
                failure: ClientError = TransportError(f"{method} {path} failed: {exc!r}")
            else:
                if response.is_success:
                    try:
                        return response.json()
                    except ValueError:
                        raise ResponseError(
                            response.status_code, "the answer is not JSON", path=path
                        ) from None
                failure = self._error(response, path, session_route)
                if not self.retry.retryable(response.status_code):
                    raise failure
                retry_after = response.headers.get("retry-after")
            if not await attempts.retry(str(failure), retry_after):
                raise failure

    async def stream(
        self, path: str, body: dict[str, Any], *, sid: str | None = None, resumable: bool = True
    ) -> ResultReader:
        """POST ``body`` and read the SSE result. When the connection drops after the server
        named the call's ``task_id``, re-POST with that ``task_id`` to re-attach (the tool is
        not run twice)."""
        headers = {"accept": "text/event-stream"}
        if sid:
            headers["x-session-id"] = sid
        task_id: str | None = None
        attempts = self.retry.attempts()
        while True:
            retry_after = None
            reader = ResultReader(task_id=task_id)
            send = body if task_id is None else {**body, "task_id": task_id}
            try:
                await self._read_stream(path, send, headers, reader)
                return reader
            except ToolFailed as exc:
                if task_id is not None and str(exc) == "unknown task_id":
                    raise ToolFailed(
                        f"the connection dropped during the call and the server no longer holds "
                        f"its result (task_id {task_id} is unknown)"
                    ) from None
                raise
            except ResponseError as exc:
                if not self.retry.retryable(exc.status):
                    raise
                failure: ClientError = exc
                retry_after = exc.retry_after
            except (httpx.TransportError, _Dropped) as exc:
                failure = TransportError(f"POST {path}: the stream broke off ({exc!r})")
                if resumable and reader.task_id:
                    task_id = reader.task_id
            if not await attempts.retry(str(failure), retry_after):
                raise failure

    async def _read_stream(
        self, path: str, body: dict[str, Any], headers: dict[str, str], reader: ResultReader
    ) -> None:
        async with self._client.stream(
            "POST", path, json=body, headers=headers, timeout=self._sse_timeout
        ) as response:
            if not response.is_success:
                await response.aread()
                raise self._error(response, path, session_route=True)
            if response.headers.get("content-type", "").startswith("application/json"):
                # The public spec text shows /create_session answering JSON {"sid": ...}.
                await response.aread()
                reader.result, reader.done = response.json(), True
                return
            lines, events = LineSplitter(), EventParser()
            async for data in response.aiter_bytes():
                for line in lines.feed(data):
                    event = events.feed(line)
                    if event is not None:
                        reader.on_event(event)
                        if reader.done:
                            return
            for line in lines.close():  # a final lone CR still ends its line
                event = events.feed(line)
                if event is not None:
                    reader.on_event(event)
                    if reader.done:
                        return
            # An event not closed by a blank line before the stream ends is discarded (SSE spec).
            raise _Dropped("the stream ended without an 'end' event")
