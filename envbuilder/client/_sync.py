"""The synchronous ORS client: the async client run on a private event loop in a thread.

One implementation serves both APIs, and the session pings keep running on that loop while
the caller's thread is busy (for example waiting for a model).
"""

from __future__ import annotations

from typing import Any

import httpx

from envbuilder.client._async import AsyncClient, AsyncRemoteEnvironment, AsyncSession
from envbuilder.client._formats import Format, ToolFormat
from envbuilder.client._http import DEFAULT_MAX_CONNECTIONS
from envbuilder.protocol import ContentBlock, Split, ToolOutput
from envbuilder.retry import RetryPolicy
from envbuilder.threadloop import LoopThread

__all__ = ["Client", "RemoteEnvironment", "Session"]


class Client:
    """An ORS server at ``base_url``::

    with Client("http://127.0.0.1:8080") as client:
        env = client.environment("gsm8k")
        print(env.num_tasks("test"))
        with env.session(split="test", index=0) as session:
            print(session.get_messages("openai"))
            out = session.call_tool("submit", {"answer": "72"})
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
        self._portal = LoopThread("envbuilder-client")

        async def make() -> AsyncClient:
            return AsyncClient(
                base_url,
                api_key=api_key,
                timeout=timeout,
                retry=retry,
                ping_interval=ping_interval,
                transport=transport,
                max_connections=max_connections,
            )

        self.aclient = self._portal.run(make())

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._portal.closed:
            self._portal.run(self.aclient.aclose())
            self._portal.close()

    def list_environments(self) -> list[str]:
        return self._portal.run(self.aclient.list_environments())

    def environment(self, name: str | None = None) -> RemoteEnvironment:
        """The environment ``name`` (None: the server's default, its first)."""
        return RemoteEnvironment(self._portal, self.aclient.environment(name))


class RemoteEnvironment:
    """Discovery and sessions of one environment on a server."""

    def __init__(self, portal: LoopThread, aenv: AsyncRemoteEnvironment):
        self._portal = portal
        self.aenv = aenv

    @property
    def name(self) -> str:
        return self._portal.run(self.aenv.name())

    def list_splits(self) -> list[Split]:
        return self._portal.run(self.aenv.list_splits())

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return self._portal.run(self.aenv.list_tasks(split))

    def num_tasks(self, split: str) -> int:
        return self._portal.run(self.aenv.num_tasks(split))

    def task(self, split: str, index: int) -> dict[str, Any]:
        return self._portal.run(self.aenv.task(split, index))

    def task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[dict[str, Any]]:
        return self._portal.run(self.aenv.task_range(split, start, stop))

    def list_tools(self, format: ToolFormat | None = None) -> list[Any]:
        return self._portal.run(self.aenv.list_tools(format))

    def session(
        self,
        task: dict[str, Any] | None = None,
        *,
        split: str | None = None,
        index: int | None = None,
        secrets: dict[str, str] | None = None,
    ) -> Session:
        """An episode on ``task`` or on ``split`` and ``index``; use as ``with``."""
        return Session(self._portal, self.aenv.session(task, split=split, index=index, secrets=secrets))


class Session:
    """One episode: created on enter, pinged in the background, deleted on exit."""

    def __init__(self, portal: LoopThread, asession: AsyncSession):
        self._portal = portal
        self.asession = asession

    def __enter__(self) -> Session:
        self._portal.run(self.asession.__aenter__())
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._portal.run(self.asession.close())

    @property
    def sid(self) -> str | None:
        return self.asession.sid

    @property
    def finished(self) -> bool:
        """Whether the episode has finished (see :attr:`AsyncSession.finished`); a call after
        that is not run and returns ``finished=True``, ``reward=None``."""
        return self.asession.finished

    @property
    def reward(self) -> float | None:
        """The reward of the output that finished the episode (None before, or when ungraded)."""
        return self.asession.reward

    def prompt(self) -> list[ContentBlock]:
        return self._portal.run(self.asession.prompt())

    def get_messages(self, format: Format | None = None) -> Any:
        return self._portal.run(self.asession.get_messages(format))

    def list_tools(self, format: ToolFormat | None = None) -> list[Any]:
        return self._portal.run(self.asession.list_tools(format))

    def call_tool(self, name: str, input: dict[str, Any] | None = None) -> ToolOutput:
        return self._portal.run(self.asession.call_tool(name, input))

    def ping(self) -> None:
        self._portal.run(self.asession.ping())
