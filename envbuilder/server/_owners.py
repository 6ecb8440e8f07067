"""Who a request is from, and which sessions are theirs.

Every request's API key (when the server has keys) and address are set by the front door
(:data:`CLIENT`); :func:`client_name` names the client, :func:`owned` names the client's session
in the store. A session is stored under its creator's name (``_sessions.session_key``), so a
lookup by any other client finds nothing: it gets what an id nobody created gets, on every
route, in every store and replica, with no check to forget.

The rule for the name: with keys, the key (a hash of it, never the key); without keys, the
address the server sees (or the one a proxy it trusts forwards). Clients behind one address
share that name and tell their sessions apart by their ids, which ``/create_session`` makes
random.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import urllib.parse
from typing import Any

from envbuilder.server._sessions import session_key

__all__ = ["CLIENT", "client_name", "owned"]

CLIENT: contextvars.ContextVar[tuple[bytes | None, Any]] = contextvars.ContextVar(
    "envbuilder_client", default=(None, None)
)
"""The request's API key (None without keys) and ASGI ``client`` (address, port), set by the
front door for every request."""


def client_name() -> str:
    """Who the running request is from: ``key:`` and a hash of its API key, else ``addr:``
    and its address. Sessions belong to it (:func:`owned`) and are capped per client."""
    key, address = CLIENT.get()
    if key is not None:
        return _key_name(key)
    return _address_name(address[0] if address else "?")


def owned(sid: str) -> str:
    """The store's key of the running request's client's session ``sid``."""
    return session_key(client_name(), sid)


def _name_key(key: bytes) -> str:
    """A key's name in the session records: a hash of it, never the key."""
    return "key:" + hashlib.sha256(key).hexdigest()[:24]


def _name_address(host: str) -> str:
    """An address's name in the session records: quoted, so that no ``/`` (a session key's
    separator) comes through a forwarded address."""
    return "addr:" + urllib.parse.quote(host, safe=":.[]?")


# Cached: only accepted keys reach here (the cache holds the server's own keys, at most), and
# the addresses of the clients seen lately.
_key_name = functools.lru_cache(maxsize=1024)(_name_key)
_address_name = functools.lru_cache(maxsize=4096)(_name_address)
