"""The server's context, :class:`ServerContext`: what every route shares (the environments, the
session store, running and finished calls), and the :class:`ServerSettings` it is made with."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from envbuilder.environment import Environment
from envbuilder.episode import Episode
from envbuilder.errors import RequestRejected, did_you_mean
from envbuilder.isolation import processes
from envbuilder.isolation.processes import Confinement
from envbuilder.server._calls import CallRegistry
from envbuilder.server._containers import ContainerKeeper
from envbuilder.server._redis import RedisStore
from envbuilder.server._sessions import Caps, Sessions, SessionStore

log = logging.getLogger("envbuilder.server")


@dataclass(frozen=True)
class ServerSettings:
    """Tunables of a server (all have the reference servers' defaults)."""

    session_timeout: float = 900.0
    """Seconds without a request after which a session is deleted."""
    reap_interval: float = 5.0
    """How often idle sessions and expired call results are swept."""
    ping_interval: float = 10.0
    """Keep-alive comment interval on streaming tool calls."""
    call_linger: float = 60.0
    """How long a finished call's result can be replayed by ``task_id``."""
    store: str = "memory"
    """Where sessions live: ``memory`` (this process) or ``redis://host:port/db`` (shared)."""

    # -- limits and access control: every request's size and work is bounded ------------------
    api_keys: tuple[str, ...] = ()
    """Keys accepted on every route but ``/health`` (empty: no key needed)."""
    accept_task_spec: bool = True
    """Whether ``/create`` takes a client's ``task_spec`` (else tasks only by split and index)."""
    client_tasks: bool = False
    """Whether ``/create`` takes a ``task_spec`` that names no served task (a task the client
    wrote, gold included). A ``task_spec`` that names a served task is always replaced by the
    served row, whatever fields it carries; a client's own task never takes a served id."""
    max_body_bytes: int = 1 << 20
    """Largest request body (413 beyond)."""
    max_header_bytes: int = 16 << 10
    """Largest request line plus headers (431 beyond)."""
    max_task_spec_bytes: int = 256 << 10
    """Largest ``task_spec`` in ``/create``, as JSON (413 beyond)."""
    max_task_range: int = 1_000_000
    """Most tasks one ``/task_range`` lists (400 beyond, saying how to page); ranges over 1,000
    tasks are streamed in batches, so memory stays bounded (``/tasks`` streams a whole split)."""
    max_sessions: int = 100_000
    """Sessions held at once, in every store (503 beyond)."""
    max_sessions_per_client: int | None = None
    """Sessions one client (an API key, or an address without keys) holds at once (429 beyond);
    default :func:`fair_share` of ``max_sessions``, so one client cannot take every session."""
    max_connections: int = 2048
    """Open connections (each runs one request at a time). At it, a new connection takes the
    place of one that runs no request at the address holding most, if that address holds at
    least as many as the new one's; else it is answered 503 with Retry-After."""
    max_connections_per_client: int | None = None
    """Open connections from one address (default :func:`fair_share` of ``max_connections``):
    past it, the address's own connection that runs no request gives way, else the new one is
    answered 503."""
    header_timeout: float = 10.0
    """Seconds a client has to send a request's line and headers (408 beyond): a client sends
    them in one write, so a connection that trickles them holds a slot for this long at most."""
    read_timeout: float = 30.0
    """Seconds a client has to send a whole request (headers and body); then it is closed."""
    graceful_timeout: float = 10.0
    """Seconds SIGTERM waits for running requests before closing them."""
    doors: tuple[str, ...] = ()
    """Protocols served besides ORS, each under its own path prefix (``_doors.DOORS``):
    ``openenv`` (``/openenv``), ``nemo-gym`` (NeMo Gym's resources-server routes at the root)."""
    max_containers: int | None = None
    """Session containers (a spec's `sandbox:`) this process runs at once, warm ones included
    (None: no bound). A new session waits for a place, clients in turn, then 503 with
    Retry-After."""
    warm_containers: int = 0
    """Containers each environment with a `sandbox:` keeps created and started ahead of need."""
    container_wait: float = 10.0
    """Seconds a new session waits for a container's place before the 503."""
    allow_unconfined_checkers: bool = False
    """Serve graders that run answers as code even where they cannot be confined (no working
    bubblewrap): what an answer makes them run then runs on this host. Off: such a spec is
    refused at start-up."""


def _confinement(envs: list[Environment], settings: ServerSettings) -> Confinement | None:
    """The confinement of the checkers that evaluate answers, when one is served.

    Raises:
        SandboxError: one is served, confinement does not work here, and running it unconfined
            was not allowed (``allow_unconfined_checkers``); the message says why and how.
    """
    evaluating = any(env.evaluates_answers for env in envs)
    return processes.serving_confinement(evaluating, settings.allow_unconfined_checkers)


def fair_share(cap: int) -> int:
    """One client's default share of a server-wide ``cap``: a quarter, but never fewer than 64
    (or the whole cap when it is smaller), so a small server still serves one busy trainer."""
    return max(min(cap, 64), cap // 4)


class ServedTasks:
    """Where recently served tasks came from, by environment and id: a client that creates an
    episode from a task it got from ``/task`` (private fields left out) is graded against the
    full row. Bounded: the oldest entries go first."""

    def __init__(self, size: int = 100_000):
        self.size = size
        self._where: OrderedDict[tuple[str, str], tuple[str, int]] = OrderedDict()

    def record(self, env: str, task_id: Any, split: str, index: int) -> None:
        if isinstance(task_id, str | int):
            key = (env, str(task_id))
            self._where[key] = (split, index)
            self._where.move_to_end(key)
            if len(self._where) > self.size:
                self._where.popitem(last=False)

    def find(self, env: str, task_id: Any) -> tuple[str, int] | None:
        return self._where.get((env, str(task_id))) if isinstance(task_id, str | int) else None


class ServerContext:
    """What every route of one server shares (``app.state.context``)."""

    def __init__(self, envs: list[Environment], settings: ServerSettings):
        if not envs:
            raise ValueError("a server needs at least one environment")
        self.envs: dict[str, Environment] = {}
        for env in envs:
            key = env.name.lower()
            if key in self.envs:
                raise ValueError(f"two environments are named {env.name!r}")
            self.envs[key] = env
        self.default = next(iter(self.envs))
        self.settings = settings
        self.confinement = _confinement(envs, settings)
        """Whether checkers that evaluate answers run confined (None: no such checker is served)."""
        self.calls = CallRegistry(settings.call_linger)
        self.sessions: Sessions = (
            SessionStore(self.calls)
            if settings.store == "memory"
            else RedisStore(settings.store, settings.session_timeout, settings.call_linger)
        )
        self.keeper = (
            ContainerKeeper(
                envs,
                self.sessions,
                size=settings.max_containers,
                warm=settings.warm_containers,
                wait=settings.container_wait,
                interval=settings.reap_interval,
            )
            if any(env.containers is not None for env in envs)
            else None
        )
        """The session containers' pool and reaper (None: no spec has a `sandbox:`)."""
        self.locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        """Each session's call lock by its key, while a call holds or awaits it (a session that
        expires instead of being deleted leaves nothing behind)."""
        self.served = ServedTasks()
        self.catalog: Any = None
        """The ``/catalog`` reply, once built (``_catalog``)."""
        per_client = settings.max_sessions_per_client
        self.caps = Caps(settings.max_sessions, per_client or fair_share(settings.max_sessions))
        # Static answers, serialised once.
        self.tools_json = {k: e.tools_listing.model_dump_json().encode() for k, e in self.envs.items()}
        self.task_tools_json = {
            k: e.task_tools_listing.model_dump_json().encode() for k, e in self.envs.items()
        }
        self._cleanups: set[asyncio.Task[None]] = set()
        self._cleanup = any(env.cleanup for env in self.envs.values())
        self.splits_json = {
            k: ("[" + ",".join(s.model_dump_json() for s in e.list_splits()) + "]").encode()
            for k, e in self.envs.items()
        }

    def env(self, name: str) -> Environment:
        env = self.envs.get(name.lower())
        if env is None:
            raise RequestRejected(404, self.unknown(name))
        return env

    def unknown(self, name: str) -> str:
        """The 404 message for an environment this server does not serve: the names it does."""
        message = f"unknown environment {name!r}; this server serves: {', '.join(self.envs)}"
        hint = did_you_mean(name.lower(), self.envs)
        return f"{message}. {hint}" if hint else message

    def deployment(self, value: str) -> str | None:
        """The served environment an ``X-Deployment`` header names (``name`` or ``owner/name``,
        any case); None when it names none (empty); on a server of several environments, 404
        listing them when it names one not served.

        The openreward client, used without a variant, sends bare paths and names the
        environment only in this header: answering from the default environment instead would
        silently substitute another benchmark. A one-environment server has nothing to confuse
        it with and answers any name, as the reference servers do (TRL's adapter sends the
        placeholder name ``env`` to a single-environment URL)."""
        value = value.strip()
        if not value:
            return None
        key = value.lower()
        if key not in self.envs and "/" in key:
            key = key.rsplit("/", 1)[1]  # owner/name: the owner is a catalog's, not ours
        if key in self.envs:
            return key
        if len(self.envs) == 1:
            return self.default
        raise RequestRejected(404, self.unknown(value))

    async def delete(self, key: str) -> None:
        """Delete the session stored as ``key`` (``SessionRecord.key``), if there is one."""
        # The session is read first only when a tool may have to clean up after it.
        session = await self.sessions.get(key) if self._cleanup else None
        await self.sessions.delete(key)
        self.locks.pop(key, None)
        if session is not None and session.episode.leaves_resources:
            self._end_session(self.envs[session.env], session.episode)

    def _end_session(self, env: Environment, episode: Episode) -> None:
        """Let the session's tools release what it left behind, in the background."""
        if not env.cleanup:
            return
        task = asyncio.get_running_loop().create_task(env.end_session(episode))
        self._cleanups.add(task)  # keep a reference until it is done
        task.add_done_callback(self._cleanups.discard)

    async def drain(self) -> None:
        """Wait for the tools' end-of-session cleanups still running (at shutdown)."""
        if self._cleanups:
            await asyncio.gather(*self._cleanups, return_exceptions=True)

    def reap(self) -> None:
        expired = self.sessions.sweep(self.settings.session_timeout)
        if expired:
            log.info(
                "%d session(s) expired after %.0f s without requests",
                len(expired),
                self.settings.session_timeout,
            )
        for session in expired:  # (a shared store's sessions expire in the store, unseen here)
            if session.episode.leaves_resources:
                self._end_session(self.envs[session.env], session.episode)
        self.calls.evict()
