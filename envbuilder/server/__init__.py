"""The ORS HTTP server: ``create_app(environments, settings)``; ``serving_app``, what ``serve`` runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envbuilder.server._access import check_exposure, read_api_keys
from envbuilder.server._context import ServerSettings
from envbuilder.server._doors import check_doors
from envbuilder.server._lazy import serving_app
from envbuilder.server._limits import set_protocol_limits, uvicorn_options
from envbuilder.server._redis import check_url as check_store_url

if TYPE_CHECKING:
    from envbuilder.server._app import create_app

__all__ = [
    "ServerSettings",
    "check_doors",
    "check_exposure",
    "check_store_url",
    "create_app",
    "read_api_keys",
    "serving_app",
    "set_protocol_limits",
    "uvicorn_options",
]


def __getattr__(name: str) -> Any:
    """``create_app`` on first use: it imports FastAPI, which ``serve`` builds after it listens."""
    if name != "create_app":
        raise AttributeError(f"module 'envbuilder.server' has no attribute {name!r}")
    from envbuilder.server._app import create_app

    globals()[name] = create_app
    return create_app
