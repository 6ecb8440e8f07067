"""API keys: when the server has any, every route but ``/health`` needs one.

A key is accepted from ``X-API-Key`` (both reference clients send it on ordinary requests),
``Authorization: Bearer`` (generic HTTP clients), or an ``api_key`` / ``OPENREWARD_API_KEY``
entry of ``X-Secrets``: the openreward client omits ``X-API-Key`` on streaming requests
(``/create_session``, ``/call``) but always carries its key there (docs/protocol.md §8.2).
Keys are compared in constant time and never logged or echoed.
"""

from __future__ import annotations

import hmac
from collections.abc import Collection, Iterable
from pathlib import Path

from envbuilder.errors import DataError, EnvbuilderError, RequestRejected
from envbuilder.server._headers import parse_secrets
from envbuilder.server._reply import error_reply

_SECRET_NAMES = frozenset({"api_key", "openreward_api_key"})

UNAUTHORIZED = error_reply(401, "an API key is required: send it in the X-API-Key header")
CHALLENGE = {"www-authenticate": 'Bearer realm="envbuilder"'}


def check_exposure(host: str, api_keys: Collection[str], *, public: bool) -> str | None:
    """The rule for where a server may listen: a host other than loopback serves every gold
    answer to whoever reaches it, so it needs an API key, or ``public`` (open on purpose).

    Returns:
        None, or the warning to show when ``host`` is served open on purpose.

    Raises:
        EnvbuilderError: a host other than loopback without a key and without ``public``
            (code ``exposed_without_key``).
    """
    loopback = host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")
    if loopback or api_keys:
        return None
    if not public:
        raise EnvbuilderError(
            f"--host {host} exposes the server, and every gold answer, without an API key",
            hint="Pass --api-key-file (or --api-key), or --public to serve it open",
            code="exposed_without_key",
        )
    return f"serving {host} with no API key: anyone who can reach it can use it"


class Keys:
    """The keys a server accepts (none: access is open)."""

    def __init__(self, keys: Iterable[str]):
        self._keys = [k.encode() for k in keys if k]

    def __bool__(self) -> bool:
        return bool(self._keys)

    def _known(self, candidate: bytes) -> bool:
        found = False
        for key in self._keys:  # no early exit: the time does not say which key was close
            found |= hmac.compare_digest(candidate, key)
        return found

    def allowed(self, headers: dict[bytes, bytes]) -> bool:
        """Whether the request carries one of the keys."""
        return self.match(headers) is not None

    def match(self, headers: dict[bytes, bytes]) -> bytes | None:
        """The key the request carries (None when it carries none of ours)."""
        key = headers.get(b"x-api-key")
        if key and self._known(key):
            return key
        auth = headers.get(b"authorization", b"")
        if auth[:7].lower() == b"bearer " and self._known(auth[7:].strip()):
            return auth[7:].strip()
        secrets = headers.get(b"x-secrets")
        if secrets:
            try:
                parsed = parse_secrets(secrets.decode("latin-1"), None)
            except RequestRejected:
                return None
            for name, value in parsed.items():
                if name.lower() in _SECRET_NAMES and self._known(value.encode()):
                    return value.encode()
        return None


def read_api_keys(given: list[str], path: Path | None, env_value: str | None) -> frozenset[str]:
    """The keys from ``--api-key`` options, a file of keys (one a line, ``#`` comments) and
    ``$ENVBUILDER_API_KEYS`` (comma-separated). A file that cannot be read is a DataError; its
    contents are never shown."""
    keys = [k.strip() for k in given]
    if env_value:
        keys += [k.strip() for k in env_value.split(",")]
    if path is not None:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(
                f"--api-key-file {path}: cannot be read ({type(exc).__name__})",
                hint="Give a UTF-8 text file with one key per line",
                code="api_key_file",
            ) from None
        keys += [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    short = [k for k in keys if k and len(k) < 16]
    if short:
        raise DataError(
            f"{len(short)} API key(s) shorter than 16 characters",
            hint="Use long random keys, e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`",
            code="api_key_short",
        )
    return frozenset(k for k in keys if k)
