"""The synchronous ORS client: the async client run on a private event loop in a thread.

One implementation serves both APIs, and the session pings keep running on that loop while
the caller's thread is busy (for example waiting for a model). Every call goes through the
client's :class:`~envbuilder.client._admission.Admission`: at most ``max_callers`` caller
threads inside a call at once, the others asleep in arrival order (thousands of threads ready
at once would each pay for the others' turns at the interpreter lock).
"""

from __future__ import annotations

import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx

from envbuilder.client._admission import Admission, default_permits
from envbuilder.client._async import AsyncClient, AsyncRemoteEnvironment, AsyncSession
from envbuilder.client._formats import Format, ToolFormat
from envbuilder.client._http import DEFAULT_MAX_CONNECTIONS
from envbuilder.protocol import ContentBlock, Split, ToolOutput
from envbuilder.retry import RetryPolicy
from envbuilder.threadloop import LoopThread

__all__ = ["Client", "RemoteEnvironment", "Session"]

T = TypeVar("T")


class _Portal:
    """The client's loop thread behind its admission: the way every synchronous call goes."""

    def __init__(self, loop: LoopThread, admission: Admission):
        self.loop = loop
        self.admission = admission
        self._depth = threading.local()

    @property
    def thread(self) -> threading.Thread:
        return self.loop.thread

    @property
    def closed(self) -> bool:
        return self.loop.closed

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop once admitted, and wait for its result."""
        depth = getattr(self._depth, "n", 0)
        # Inside a call already (a callback on this thread) or on the loop's own thread: no
        # permit taken, so neither can wait on itself; the loop thread's call goes as it did.
        if depth or threading.get_ident() == self.loop.thread.ident:
            self._depth.n = depth + 1
            try:
                return self.loop.run(coro)
            finally:
                self._depth.n = depth
        try:
            self.admission.enter()
        except BaseException:
            coro.close()  # never run: no "never awaited" warning
            raise
        self._depth.n = 1
        try:
            return self.loop.run(coro)
        finally:
            self._depth.n = 0
            self.admission.leave()


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
        max_callers: int | None = None,
    ):
        """``max_callers``: caller threads inside a call at once, the others waiting their turn
        in arrival order without a deadline (None: ``max_connections`` and a tenth more)."""
        admission = Admission(default_permits(max_connections) if max_callers is None else max_callers)
        self._portal = _Portal(LoopThread("envbuilder-client"), admission)

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

        self.aclient = self._portal.loop.run(make())

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections and the loop; callers still waiting for their turn fail with
        ``ClientError``. Close after the running calls have ended: as before, one still running
        when the loop stops is not answered."""
        if not self._portal.closed:
            self._portal.admission.close()
            self._portal.loop.run(self.aclient.aclose())
            self._portal.loop.close()

    def list_environments(self) -> list[str]:
        return self._portal.run(self.aclient.list_environments())

    def environment(self, name: str | None = None) -> RemoteEnvironment:
        """The environment ``name`` (None: the server's default, its first)."""
        return RemoteEnvironment(self._portal, self.aclient.environment(name))


class RemoteEnvironment:
    """Discovery and sessions of one environment on a server."""

    def __init__(self, portal: _Portal, aenv: AsyncRemoteEnvironment):
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

    def __init__(self, portal: _Portal, asession: AsyncSession):
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
