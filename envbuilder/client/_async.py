"""The asynchronous ORS client: discovery, sessions (pinged while open), prompts, tool calls."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from types import TracebackType
from typing import Any

import httpx
import orjson
from pydantic import TypeAdapter, ValidationError

from envbuilder.client._errors import ClientError, EpisodeFinished, NotFound, SessionGone, tool_call_error
from envbuilder.client._formats import Format, ToolFormat, convert_messages, convert_tools, parse_messages
from envbuilder.client._http import DEFAULT_MAX_CONNECTIONS, Http
from envbuilder.protocol import ContentBlock, Message, Split, TextBlock, ToolOutput, ToolSpec
from envbuilder.retry import RetryPolicy

__all__ = ["AsyncClient", "AsyncRemoteEnvironment", "AsyncSession"]

_BLOCKS: TypeAdapter[list[ContentBlock]] = TypeAdapter(list[ContentBlock])
_SPLITS: TypeAdapter[list[Split]] = TypeAdapter(list[Split])


def _parse(adapter: TypeAdapter[Any], data: Any, what: str) -> Any:
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        raise ClientError(f"the server's {what} is malformed: {exc}") from None


def _tools(listing: Any) -> list[ToolSpec]:
    if not isinstance(listing, dict) or not isinstance(listing.get("tools"), list):
        raise ClientError("the server's tool listing has no 'tools' list")
    return [_parse(TypeAdapter(ToolSpec), t, "tool listing") for t in listing["tools"]]


class AsyncClient:
    """An ORS server at ``base_url``::

    async with AsyncClient("http://127.0.0.1:8080") as client:
        env = client.environment("gsm8k")
        async with env.session(split="test", index=0) as session:
            messages = await session.get_messages("openai")
            out = await session.call_tool("submit", {"answer": "72"})
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        ping_interval: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ):
        self.http = Http(
            base_url,
            api_key=api_key,
            timeout=timeout,
            retry=retry,
            transport=transport,
            max_connections=max_connections,
        )
        self.ping_interval = ping_interval

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def list_environments(self) -> list[str]:
        names = await self.http.request("GET", "/list_environments")
        if not isinstance(names, list):
            raise ClientError("/list_environments did not answer a list")
        return [str(n) for n in names]

    def environment(self, name: str | None = None) -> AsyncRemoteEnvironment:
        """The environment ``name`` (None: the server's default, its first)."""
        return AsyncRemoteEnvironment(self, name)


class AsyncRemoteEnvironment:
    """Discovery and sessions of one environment on a server."""

    def __init__(self, client: AsyncClient, name: str | None):
        self.client = client
        self._name = name

    async def name(self) -> str:
        if self._name is None:
            names = await self.client.list_environments()
            if not names:
                raise NotFound(404, "the server lists no environments", path="/list_environments")
            self._name = names[0]
        return self._name

    async def _path(self, route: str) -> str:
        return f"/{await self.name()}/{route}"

    async def list_splits(self) -> list[Split]:
        return _parse(_SPLITS, await self.client.http.request("GET", await self._path("splits")), "splits")

    async def list_tasks(self, split: str) -> list[dict[str, Any]]:
        body = await self.client.http.request("POST", await self._path("tasks"), json={"split": split})
        return list(body["tasks"])

    async def num_tasks(self, split: str) -> int:
        body = await self.client.http.request("POST", await self._path("num_tasks"), json={"split": split})
        return int(body["num_tasks"])

    async def task(self, split: str, index: int) -> dict[str, Any]:
        body = await self.client.http.request(
            "POST", await self._path("task"), json={"split": split, "index": index}
        )
        return dict(body["task"])

    async def task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[dict[str, Any]]:
        body = await self.client.http.request(
            "POST", await self._path("task_range"), json={"split": split, "start": start, "stop": stop}
        )
        return list(body["tasks"])

    async def list_tools(self, format: ToolFormat | None = None) -> list[Any]:
        listing = await self.client.http.request("GET", await self._path("tools"))
        return convert_tools(_tools(listing), format)

    def session(
        self,
        task: dict[str, Any] | None = None,
        *,
        split: str | None = None,
        index: int | None = None,
        secrets: dict[str, str] | None = None,
    ) -> AsyncSession:
        """An episode on ``task`` (a task JSON) or on ``split`` and ``index``; use as
        ``async with``. ``secrets`` travel in the ``X-Secrets`` header."""
        if (task is None) == (split is None or index is None) or (task is not None and split is not None):
            raise ValueError("give either task, or both split and index")
        return AsyncSession(self, task=task, split=split, index=index, secrets=secrets)


class AsyncSession:
    """One episode: created on enter, pinged every ``ping_interval`` seconds, deleted on exit."""

    def __init__(
        self,
        env: AsyncRemoteEnvironment,
        *,
        task: dict[str, Any] | None,
        split: str | None,
        index: int | None,
        secrets: dict[str, str] | None,
    ):
        self.env = env
        self.http = env.client.http
        self._create: dict[str, Any] = (
            {"task_spec": task} if task is not None else {"split": split, "index": index}
        )
        self._secrets = secrets
        self.sid: str | None = None
        self._name = ""
        self._pinger: asyncio.Task[None] | None = None
        self._messages: list[Message] | None = None
        self._tools: list[ToolSpec] | None = None
        self.gone = False
        self.finished = False
        """Whether the episode has finished: a tool's output said so (the answer was graded, the
        simulated user ended the conversation), or the server refused a call because it had."""
        self.reward: float | None = None
        """The reward of the output that finished the episode (None before, or when ungraded)."""

    async def __aenter__(self) -> AsyncSession:
        self._name = await self.env.name()
        minted = await self.http.stream("/create_session", {}, resumable=False)
        result = minted.result
        sid = result.get("sid") if isinstance(result, dict) else None
        self.sid = str(sid or minted.task_id or "")
        if not self.sid:
            raise ClientError("/create_session named no session id")
        headers: dict[str, str] = {}
        if self._secrets:
            wire = {k: {"value": v, "allowed_domains": []} for k, v in self._secrets.items()}
            headers["x-secrets"] = base64.b64encode(orjson.dumps(wire)).decode()
        await self._request("POST", "/create", json={**self._create, "env_name": self._name}, headers=headers)
        await self.ping()
        self._pinger = asyncio.create_task(self._ping_loop())
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop pinging and delete the session (errors here never mask the caller's own)."""
        if self._pinger is not None:
            self._pinger.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pinger
            self._pinger = None
        if self.sid is None:
            return
        for route in ("/delete", "/delete_session"):
            with contextlib.suppress(ClientError):
                await self.http.request("POST", route, sid=self.sid)
        self.sid = None

    async def _request(
        self, method: str, path: str, *, json: Any = None, headers: dict[str, str] | None = None
    ) -> Any:
        if self.sid is None:
            raise SessionGone(410, "the session is closed", path=path)
        try:
            return await self.http.request(
                method, path, json=json, sid=self.sid, headers=headers, session_route=path != "/create"
            )
        except SessionGone:
            self.gone = True
            raise

    async def ping(self) -> None:
        await self._request("POST", "/ping")

    async def _ping_loop(self) -> None:
        interval = self.env.client.ping_interval
        while True:
            await asyncio.sleep(interval)
            try:
                await self.ping()
            except SessionGone:
                return  # the server forgot the session; the next request will say so
            except ClientError:
                continue  # a missed ping is not fatal: sessions time out after minutes

    async def prompt(self) -> list[ContentBlock]:
        """The task's prompt as text and image blocks."""
        return _parse(_BLOCKS, await self._request("GET", f"/{self._name}/prompt"), "prompt")

    async def get_messages(self, format: Format | None = None) -> Any:
        """The task's conversation, raw (``format=None``) or in a provider's shape. A server
        without ``/messages`` gives the prompt as one user message."""
        if self._messages is None:
            try:
                self._messages = parse_messages(await self._request("GET", f"/{self._name}/messages"))
            except NotFound:
                self._messages = [Message(role="user", blocks=list(await self.prompt()))]
        return convert_messages(self._messages, format)

    async def list_tools(self, format: ToolFormat | None = None) -> list[Any]:
        """This task's tools (``/task_tools``; servers without it: ``/tools``)."""
        if self._tools is None:
            try:
                listing = await self._request("GET", f"/{self._name}/task_tools")
            except NotFound:
                listing = await self.http.request("GET", f"/{self._name}/tools")
            self._tools = _tools(listing)
        return convert_tools(self._tools, format)

    async def call_tool(self, name: str, input: dict[str, Any] | None = None) -> ToolOutput:
        """Run tool ``name``. Raises ToolCallError (not run: .reason says why), ToolFailed
        (the tool raised), SessionGone, or TransportError after bounded re-attaching.

        An episode the environment ended is a state, not an error: once an output is
        ``finished`` (or the server says the episode has finished), :attr:`finished` is True and
        every later call is answered without running, by an output with ``finished=True``,
        ``reward=None`` (a reward is paid once) and ``metadata={"not_run": "episode_finished"}``.
        """
        if self.sid is None:
            raise SessionGone(410, "the session is closed", path="/call")
        if self.finished:
            return _not_run(name)
        try:
            reader = await self.http.stream(
                f"/{self._name}/call", {"name": name, "input": input or {}}, sid=self.sid
            )
        except SessionGone:
            self.gone = True
            raise
        result = reader.result
        if not isinstance(result, dict) or "ok" not in result:
            raise ClientError(f"the server's tool result has no 'ok': {reader.end_data[:200]!r}")
        if not result["ok"]:
            error = tool_call_error(str(result.get("error", "")), result.get("reason"))
            if isinstance(error, EpisodeFinished):  # it ended without this client seeing it
                self.finished = True
                return _not_run(name)
            raise error
        output: ToolOutput = _parse(TypeAdapter(ToolOutput), result.get("output"), "tool output")
        if output.finished:
            self.finished = True
            self.reward = output.reward
        return output


def _not_run(name: str) -> ToolOutput:
    """The output of a call made after the episode finished: not run, no reward."""
    text = f"{name!r} was not run: the episode has finished."
    return ToolOutput(
        blocks=[TextBlock(text=text)], finished=True, reward=None, metadata={"not_run": "episode_finished"}
    )
