"""What every route shares: the environments, the session store, running and finished calls."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from envbuilder.environment import Environment
from envbuilder.episode import Episode
from envbuilder.errors import RequestError
from envbuilder.server._calls import CallRegistry
from envbuilder.server._sessions import SessionStore

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


class State:
    """The server's state (``app.state.ors``)."""

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
        self.sessions = SessionStore()
        self.calls = CallRegistry(settings.call_linger)
        self.locks: dict[str, asyncio.Lock] = {}
        # Static answers, serialised once.
        self.tools_json = {k: e.tools_listing.model_dump_json().encode() for k, e in self.envs.items()}
        self.task_tools_json = {
            k: e.task_tools_listing.model_dump_json().encode() for k, e in self.envs.items()
        }
        self._cleanups: set[asyncio.Task[None]] = set()
        self.splits_json = {
            k: ("[" + ",".join(s.model_dump_json() for s in e.list_splits()) + "]").encode()
            for k, e in self.envs.items()
        }

    def env(self, name: str) -> Environment:
        env = self.envs.get(name.lower())
        if env is None:
            raise RequestError(404, f"unknown environment {name!r}")
        return env

    def delete(self, sid: str) -> None:
        session = self.sessions.get(sid)
        self.sessions.delete(sid)
        self.locks.pop(sid, None)
        if session is not None and session.episode.tool_state:
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
        for sid in self.sessions.idle(self.settings.session_timeout):
            log.info("session expired after %.0f s without requests", self.settings.session_timeout)
            self.delete(sid)
        self.calls.evict()
