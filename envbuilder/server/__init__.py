"""The ORS HTTP server: ``create_app(environments, settings)``."""

from envbuilder.server._access import check_exposure, read_api_keys
from envbuilder.server._app import create_app
from envbuilder.server._context import ServerSettings
from envbuilder.server._doors import check_doors
from envbuilder.server._limits import set_protocol_limits, uvicorn_options
from envbuilder.server._redis import check_url as check_store_url

__all__ = [
    "ServerSettings",
    "check_doors",
    "check_exposure",
    "check_store_url",
    "create_app",
    "read_api_keys",
    "set_protocol_limits",
    "uvicorn_options",
]
