"""How the server picks a sandbox backend (``$ENVBUILDER_SANDBOX``): one shared per name and settings."""

from __future__ import annotations

import os

from envbuilder.errors import SandboxError
from envbuilder.isolation.sandbox._backend import Backend
from envbuilder.isolation.sandbox._bwrap import BubblewrapBackend
from envbuilder.isolation.sandbox._docker import DockerBackend
from envbuilder.plugins import Registry

#: Environment variable naming the backend (``bubblewrap`` or ``docker``).
BACKEND_ENV = "ENVBUILDER_SANDBOX"
backends: Registry[type[Backend]] = Registry(
    "sandbox_backend",
    "envbuilder.sandbox_backends",
    what="sandbox backend",
    known="backends",
    error=SandboxError,
)
"""The sandbox backends by name: the built-in ones, and any a package adds through an entry point
in ``envbuilder.sandbox_backends``."""
backends.add("bubblewrap", BubblewrapBackend)
backends.add("docker", DockerBackend)


def backend_from_name(name: str | None = None) -> Backend:
    """The backend called ``name`` (default: ``$ENVBUILDER_SANDBOX``, else ``bubblewrap``).

    Raises:
        SandboxError: the name is unknown.
    """
    return backends.get(name or os.environ.get(BACKEND_ENV) or "bubblewrap")()


_default: dict[tuple[str | None, ...], Backend] = {}


def default_backend(name: str | None = None) -> Backend:
    """One shared backend per name (``None``: ``$ENVBUILDER_SANDBOX``) and settings (the
    environment variables it reads when made, e.g. ``DOCKER_HOST``)."""
    chosen = name or os.environ.get(BACKEND_ENV) or "bubblewrap"
    cls = backends.get(chosen)
    key = (chosen, *(os.environ.get(var) for var in cls.ENV))
    backend = _default.get(key)
    if backend is None:
        backend = _default[key] = backend_from_name(chosen)
    return backend
