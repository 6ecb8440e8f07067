"""Reading a request's headers: the session id (``X-Session-ID``) and the secrets (``X-Secrets``).

The routes need these (``_routes``), and so does the check of API keys (``_access``), which
finds a key among the secrets."""

from __future__ import annotations

import base64
import binascii

import orjson

from envbuilder.errors import RequestRejected

MAX_SID = 128
"""Longest ``X-Session-ID`` (a UUID is 36 characters)."""


def require_sid(header: str | None) -> str:
    """The ``X-Session-ID`` header, stripped; 400 when absent, too long or not printable ASCII."""
    sid = (header or "").strip()
    if not sid:
        raise RequestRejected(400, "X-Session-ID header is required")
    if len(sid) > MAX_SID or not sid.isascii() or not sid.isprintable():
        raise RequestRejected(400, f"X-Session-ID must be at most {MAX_SID} printable ASCII characters")
    return sid


def parse_secrets(header: str | None, body: dict[str, str] | None) -> dict[str, str]:
    """Secrets from the body (ors-sdk) and from ``X-Secrets`` (openreward): base64 of
    ``{name: {"value": str, "allowed_domains": [...]}}`` (plain string values accepted too)."""
    secrets = dict(body or {})
    if header:
        try:
            decoded = orjson.loads(base64.b64decode(header, validate=True))
            if not isinstance(decoded, dict):
                raise ValueError
            for name, item in decoded.items():
                value = item.get("value") if isinstance(item, dict) else item
                if not isinstance(value, str):
                    raise ValueError
                secrets[str(name)] = value
        except (ValueError, binascii.Error, orjson.JSONDecodeError):
            # Say what is wrong without echoing anything of the header.
            raise RequestRejected(
                400,
                "X-Secrets header is invalid: expected base64 of a JSON object "
                '{"NAME": {"value": "...", "allowed_domains": [...]}}',
            ) from None
    return secrets
