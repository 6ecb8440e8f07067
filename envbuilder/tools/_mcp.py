"""The ``mcp`` tool kind: the tools of a Model Context Protocol server, offered to the agent.

One entry of `tools:` names an MCP server, started as a stdio command (``command:``, run in the
spec's folder) or reached over streamable HTTP (``url:``). When the spec loads, its tools are
listed (through the official ``mcp`` SDK) and each becomes a tool of the environment with the
server's own name (after ``prefix``), description and input schema; ``include`` keeps only some.

The connection is shared by every session of the environment: it is opened on the first call
in each event loop, kept open, and reopened after the server goes away. The server validates
a call's input against its schema; an error it reports (``isError``) is the call's error output.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib.util
import os
import re
import shlex
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from envbuilder.errors import Loc, ToolError
from envbuilder.protocol import ImageBlock, TextBlock
from envbuilder.tools._base import Tool, ToolCall, ToolConfig, ToolContext, ToolReply

NO_SDK = "the mcp tool kind needs the MCP SDK, which is not installed"
INSTALL = "pip install 'envbuilder[mcp]'"


class McpConfig(ToolConfig):
    """The tools of an MCP server (a stdio command or a streamable-HTTP URL)."""

    type: Literal["mcp"]
    command: list[str] | None = Field(default=None, min_length=1)
    """The server's command and arguments, run in the spec's folder and spoken to over stdio,
    e.g. `[python, weather_server.py]`."""
    url: str | None = None
    """Instead of `command`: the server's streamable-HTTP endpoint, e.g. `http://127.0.0.1:8000/mcp`."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for the command (added to the server's own)."""
    include: list[str] | None = None
    """Offer only these of the server's tools (default: all)."""
    prefix: str = Field(default="", pattern=r"^[A-Za-z0-9_-]{0,32}$")
    """Put before each tool's name (two servers with a `search` tool each need one)."""
    timeout: float = Field(default=30.0, gt=0, le=600)
    """Seconds to wait for the server to list its tools or answer one call."""

    def runs_code(self) -> tuple[Loc, str]:
        if self.command is not None:
            return ("command",), f"starts the command {shlex.join(self.command)!r}"
        return ("url",), f"offers the agent the tools of the MCP server at {self.url!r}"

    @model_validator(mode="after")
    def _one_server(self) -> McpConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of `command` or `url`")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("`url` must start with http:// or https://")
        if self.name is not None:
            raise ValueError("an mcp entry offers the server's tools by their own names; use `prefix`")
        return self


class _Link:
    """One MCP server: listing its tools at load time, and a kept-open session per event loop."""

    def __init__(self, config: McpConfig, base_dir: Path | None):
        self.config = config
        self.base_dir = base_dir
        self._sessions: dict[asyncio.AbstractEventLoop, tuple[asyncio.Task[None], asyncio.Queue[Any]]] = {}

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[Any]:
        try:
            from mcp import ClientSession, StdioServerParameters
            from mcp.client import streamable_http
            from mcp.client.stdio import stdio_client
        except ImportError:
            raise ToolError(NO_SDK, hint=INSTALL) from None

        cfg = self.config
        timeout = timedelta(seconds=cfg.timeout)
        if cfg.command is not None:
            params = StdioServerParameters(
                command=cfg.command[0],
                args=cfg.command[1:],
                env={**os.environ, **cfg.env},
                cwd=self.base_dir,
            )
            async with (
                stdio_client(params) as (read, write),
                ClientSession(read, write, read_timeout_seconds=timeout) as session,
            ):
                await session.initialize()
                yield session
        else:
            assert cfg.url is not None
            async with contextlib.AsyncExitStack() as stack:
                if hasattr(streamable_http, "streamable_http_client"):  # mcp >= 1.24
                    import httpx

                    client = httpx.AsyncClient(timeout=httpx.Timeout(cfg.timeout, read=cfg.timeout * 10))
                    await stack.enter_async_context(client)
                    transport = streamable_http.streamable_http_client(cfg.url, http_client=client)
                else:
                    transport = streamable_http.streamablehttp_client(cfg.url, timeout=cfg.timeout)
                read, write, _ = await stack.enter_async_context(transport)
                session = await stack.enter_async_context(
                    ClientSession(read, write, read_timeout_seconds=timeout)
                )
                await session.initialize()
                yield session

    def list_tools(self) -> list[Any]:
        """The server's tools, listed from a worker thread (loading may run inside a loop)."""

        async def listing() -> list[Any]:
            async with self.connect() as session:
                return list((await session.list_tools()).tools)

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            future = pool.submit(asyncio.run, asyncio.wait_for(listing(), self.config.timeout))
            try:
                return future.result()
            except Exception as exc:
                where = "command" if self.config.command is not None else "url"
                raise ToolError(
                    f"cannot list the MCP server's tools: {_reason(exc)}",
                    hint="Check that the server starts and speaks MCP",
                    loc=(where,),
                ) from None

    async def call(self, name: str, args: dict[str, Any]) -> Any:
        loop = asyncio.get_running_loop()
        entry = self._sessions.get(loop)
        if entry is None or entry[0].done():
            queue: asyncio.Queue[Any] = asyncio.Queue()
            entry = (loop.create_task(self._serve(queue)), queue)
            self._sessions[loop] = entry
        result: asyncio.Future[Any] = loop.create_future()
        await entry[1].put((name, args, result))
        return await asyncio.wait_for(result, self.config.timeout * 2)

    async def _serve(self, queue: asyncio.Queue[Any]) -> None:
        """Hold one session open and run the queued calls on it (each in its own task)."""
        pending: tuple[str, dict[str, Any], asyncio.Future[Any]] | None = None
        try:
            async with self.connect() as session:

                async def one(name: str, args: dict[str, Any], fut: asyncio.Future[Any]) -> None:
                    try:
                        value = await session.call_tool(name, args)
                    except Exception as exc:
                        if not fut.done():
                            fut.set_exception(ToolError(f"the MCP server failed: {_reason(exc)}"))
                    else:
                        if not fut.done():
                            fut.set_result(value)

                running: set[asyncio.Task[None]] = set()
                while True:
                    pending = await queue.get()
                    task = asyncio.create_task(one(*pending))
                    running.add(task)
                    task.add_done_callback(running.discard)
                    pending = None
        except Exception as exc:  # the server died or never started: fail what waits
            error = ToolError(f"the MCP server is unavailable: {_reason(exc)}")
            waiting = [pending] if pending else []
            while not queue.empty():
                waiting.append(queue.get_nowait())
            for *_, fut in waiting:
                if not fut.done():
                    fut.set_exception(error)

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        entry = self._sessions.pop(loop, None)
        if entry is not None:
            entry[0].cancel()
            with contextlib.suppress(BaseException):
                await entry[0]


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _reason(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class _AnyInput(BaseModel):
    model_config = ConfigDict(extra="allow")


def _schema_model(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A model that takes any object and whose JSON Schema is the server's own."""
    model = create_model(f"{name}_input", __base__=_AnyInput)
    offered = dict(schema) or {"type": "object", "properties": {}}

    def model_json_schema(cls: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return offered

    model.model_json_schema = classmethod(model_json_schema)  # type: ignore[method-assign,assignment]
    return model


class McpTool(Tool):
    Config = McpConfig
    config: McpConfig
    blocking = True
    description = "A tool of an MCP server."
    reads_input: ClassVar[frozenset[str]] = frozenset()

    def __init__(
        self, config: McpConfig, context: ToolContext, *, link: _Link | None = None, remote: Any = None
    ):
        super().__init__(config, context)
        if importlib.util.find_spec("mcp") is None:
            raise ToolError(NO_SDK, hint=INSTALL, loc=("type",))
        self.link = link or _Link(config, context.base_dir)
        self.remote = remote
        self._model: type[BaseModel] | None = None
        if remote is not None:
            self._model = _schema_model(self.name, remote.inputSchema or {})
            self.config = config.model_copy(
                update={"description": remote.description or remote.title or None}
            )

    @property
    def name(self) -> str:
        if self.remote is None:
            return f"{self.config.prefix}mcp"
        return self.config.prefix + re.sub(r"[^A-Za-z0-9_-]", "_", self.remote.name)[:64]

    def expand(self) -> list[Tool]:
        tools = self.link.list_tools()
        include = self.config.include
        if include is not None:
            missing = sorted(set(include) - {t.name for t in tools})
            if missing:
                raise ToolError(
                    f"the MCP server has no tool {', '.join(map(repr, missing))}",
                    hint=f"Its tools: {', '.join(sorted(t.name for t in tools))}",
                    loc=("include",),
                )
            tools = [t for t in tools if t.name in include]
        return [McpTool(self.config, self.context, link=self.link, remote=t) for t in tools]

    def input_model(self) -> type[BaseModel] | None:
        return self._model

    async def run(self, call: ToolCall) -> ToolReply:
        assert self.remote is not None
        result = await self.link.call(self.remote.name, call.args)
        blocks: list[Any] = []
        for item in result.content:
            if item.type == "text":
                blocks.append(TextBlock(text=item.text))
            elif item.type == "image":
                blocks.append(ImageBlock(data=item.data, mimeType=item.mimeType))
            else:
                blocks.append(TextBlock(text=f"[{item.type} content]"))
        if result.isError:
            raise ToolError(" ".join(b.text for b in blocks if isinstance(b, TextBlock)) or "the tool failed")
        structured = getattr(result, "structuredContent", None)
        return ToolReply(blocks or [TextBlock(text="")], {"structured": structured} if structured else None)

    async def aclose(self) -> None:
        if self.remote is not None:
            await self.link.aclose()
