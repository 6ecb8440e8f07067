"""The ORS HTTP server: ``create_app(environments, settings)``."""

from envbuilder.server._app import ServerSettings, create_app

__all__ = ["ServerSettings", "create_app"]
