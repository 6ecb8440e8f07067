"""Where episodes run: in-process on a compiled spec, or on a remote ORS server via the client."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from envbuilder.client import AsyncClient, ClientError, ToolCallError, ToolFailed
from envbuilder.environment import Environment
from envbuilder.errors import EnvbuilderError, did_you_mean
from envbuilder.inprocess import LocalEpisode
from envbuilder.llm import EndpointUse
from envbuilder.protocol import ListToolsOutput, Message, Split, ToolSpec

__all__ = ["EpisodeHandle", "EvalBackend", "LocalBackend", "RemoteBackend", "pick_environment"]


class EpisodeHandle(Protocol):
    task_id: str | None
    task: dict[str, Any]
    """The task's fields (for grouping results by a field such as ``subject``)."""

    async def messages(self) -> list[Message]: ...
    async def tools(self) -> list[ToolSpec]: ...
    async def call(self, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        """The wire ``RunToolOutput`` JSON: ``{"ok": true, "output": ...}`` or ``{"ok": false, ...}``."""
        ...


class EvalBackend(Protocol):
    env_name: str
    server: str | None
    """The ORS server's URL, or None in-process."""
    endpoints: Sequence[EndpointUse]
    """The simulated user's and judges' endpoints as this process runs them (none on a server,
    which runs its own)."""
    private_fields: frozenset[str]
    """The task fields clients never see (the gold answer), when known: in-process only (a
    server's tasks arrive without them)."""

    async def content_hash(self) -> str | None:
        """``sha256:…`` over the environment's files, None when unknown."""
        ...

    async def splits(self) -> list[Split]:
        """The environment's splits, with what each is for."""
        ...

    async def num_tasks(self, split: str) -> int: ...
    async def first_task(self, split: str) -> dict[str, Any]:
        """The fields of the split's first task (to check ``--group-by`` before running)."""
        ...

    async def tool_listing(self) -> ListToolsOutput:
        """The environment's ``/tools`` listing (with its ``terminal_tool``)."""
        ...

    def episode(self, split: str, index: int) -> contextlib.AbstractAsyncContextManager[EpisodeHandle]: ...
    async def aclose(self) -> None: ...


class _LocalEpisode:
    """An in-process episode (:class:`LocalEpisode`, the one driver) as eval's handle."""

    def __init__(self, episode: LocalEpisode):
        self.episode = episode
        self.task = dict(episode.env.public(episode.task))  # what a served run records: /task's
        self.task_id = str(self.task["id"]) if self.task.get("id") is not None else None

    async def messages(self) -> list[Message]:
        return self.episode.env.messages(self.episode.task)

    async def tools(self) -> list[ToolSpec]:
        return self.episode.tools

    async def call(self, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        try:
            result = await self.episode.run_tool(name, tool_input)
        except Exception as exc:  # a tool bug is the episode's record, not the run's crash
            return {"ok": False, "error": f"the tool failed: {type(exc).__name__}: {exc}", "reason": None}
        return result.model_dump(mode="json")


class LocalBackend:
    """A compiled spec, run in this process without HTTP."""

    def __init__(self, env: Environment):
        self.env = env
        self.env_name = env.name
        self.server: str | None = None
        self.endpoints: Sequence[EndpointUse] = env.endpoints
        self.private_fields = env.private_fields

    async def content_hash(self) -> str | None:
        from envbuilder.catalog import content_hash, file_sha256

        return content_hash({name: file_sha256(path) for name, path in self.env.files.items()})

    async def splits(self) -> list[Split]:
        return self.env.list_splits()

    async def num_tasks(self, split: str) -> int:
        return len(self.env.split(split))

    async def first_task(self, split: str) -> dict[str, Any]:
        return dict(self.env.public(self.env.split(split).task(0)))

    async def tool_listing(self) -> ListToolsOutput:
        return self.env.tools_listing

    @contextlib.asynccontextmanager
    async def episode(self, split: str, index: int) -> AsyncIterator[EpisodeHandle]:
        episode = LocalEpisode.of(self.env, split, index)
        try:
            yield _LocalEpisode(episode)
        finally:  # what the episode's tools hold (a sandbox folder, a browser page) is released
            await episode.aend()

    async def aclose(self) -> None:
        # the judges' connections belong to this run's event loop: released with it
        await self.env.aclose()


class _RemoteEpisode:
    def __init__(self, session: Any, task: dict[str, Any]):
        self.session = session
        self.task = task
        self.task_id = str(task["id"]) if task.get("id") is not None else None

    async def messages(self) -> list[Message]:
        return list(await self.session.get_messages())

    async def tools(self) -> list[ToolSpec]:
        return list(await self.session.list_tools())

    async def call(self, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        try:
            output = await self.session.call_tool(name, tool_input)
        except ToolCallError as exc:
            return {"ok": False, "error": exc.error, "reason": exc.reason}
        except ToolFailed as exc:
            return {"ok": False, "error": f"the tool failed: {exc}", "reason": None}
        return {"ok": True, "output": output.model_dump(mode="json")}


def pick_environment(url: str, names: list[str], wanted: str | None) -> str:
    """Which of the server's environments to run: ``wanted``, or the only one (never a guess)."""
    listed = ", ".join(names) or "(none)"
    if wanted is None:
        if len(names) == 1:
            return names[0]
        raise EnvbuilderError(
            f"{url} serves {len(names)} environments: {listed}",
            hint="Name one with --env (or several with --envs a,b)",
            code="env_required",
        )
    if wanted not in names:
        close = did_you_mean(wanted, names)
        raise EnvbuilderError(
            f"--env {wanted!r}: {url} serves no such environment",
            hint=f"{close + ' ' if close else ''}Environments: {listed}",
            code="unknown_env",
        )
    return wanted


class RemoteBackend:
    """An environment on an ORS server (envbuilder's or any other)."""

    def __init__(self, client: AsyncClient, env_name: str):
        self.client = client
        self.env = client.environment(env_name)
        self.env_name = env_name
        self.server: str | None = str(client.http.base_url)
        self.endpoints: Sequence[EndpointUse] = ()
        self.private_fields: frozenset[str] = frozenset()  # (the server does not say)

    async def content_hash(self) -> str | None:
        """From the server's ``GET /catalog`` (envbuilder's); None when it has none."""
        try:
            catalog = await self.client.http.request("GET", "/catalog")
        except ClientError:
            return None
        for entry in catalog.get("environments", []) if isinstance(catalog, dict) else []:
            if isinstance(entry, dict) and entry.get("name") == self.env_name:
                found = entry.get("content_hash")
                return str(found) if found else None
        return None

    @classmethod
    async def connect(cls, url: str, env_name: str | None = None, **client_args: Any) -> RemoteBackend:
        """The environment ``env_name`` on the server at ``url``; None: the server's only one.

        Raises:
            EnvbuilderError: the server serves several environments and none was named (the
                message lists them), or ``env_name`` is not one of them (with "Did you mean …?").
            ClientError: the server could not be reached or answered nonsense.
        """
        client = AsyncClient(url, **client_args)
        try:
            names = await client.list_environments()
        except ClientError:
            await client.aclose()
            raise
        try:
            return cls(client, pick_environment(url, names, env_name))
        except EnvbuilderError:
            await client.aclose()
            raise

    async def splits(self) -> list[Split]:
        return list(await self.env.list_splits())

    async def num_tasks(self, split: str) -> int:
        return await self.env.num_tasks(split)

    async def first_task(self, split: str) -> dict[str, Any]:
        return await self.env.task(split, 0)

    async def tool_listing(self) -> ListToolsOutput:
        listing = await self.client.http.request("GET", f"/{self.env_name}/tools")
        try:
            return ListToolsOutput.model_validate(listing)
        except ValueError as exc:
            raise ClientError(f"the server's tool listing is malformed: {exc}") from None

    @contextlib.asynccontextmanager
    async def episode(self, split: str, index: int) -> AsyncIterator[EpisodeHandle]:
        task = await self.env.task(split, index)
        async with self.env.session(split=split, index=index) as session:
            yield _RemoteEpisode(session, task)

    async def aclose(self) -> None:
        await self.client.aclose()
