"""Sessions: small serialisable records in a store, with an inactivity reaper."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from envbuilder.episode import Episode


@dataclass
class Session:
    """One ORS session: which environment, and the episode's state."""

    sid: str
    env: str
    episode: Episode
    last_seen: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "sid": self.sid,
            "env": self.env,
            "episode": self.episode.to_dict(),
            "last_seen": self.last_seen,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Session:
        return cls(
            sid=data["sid"],
            env=data["env"],
            episode=Episode.from_dict(data["episode"]),
            last_seen=data["last_seen"],
        )


class SessionStore:
    """In-process store. A shared store (for several workers) implements the same methods
    and keeps :meth:`Session.to_dict` records."""

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, sid: str) -> Session | None:
        return self._sessions.get(sid)

    def put(self, session: Session) -> None:
        session.last_seen = time.monotonic()
        self._sessions[session.sid] = session

    def touch(self, session: Session) -> None:
        session.last_seen = time.monotonic()

    def delete(self, sid: str) -> bool:
        return self._sessions.pop(sid, None) is not None

    def idle(self, seconds: float) -> list[str]:
        """Sids not seen for more than ``seconds``."""
        cutoff = time.monotonic() - seconds
        return [sid for sid, s in self._sessions.items() if s.last_seen < cutoff]
