"""How the server picks a sandbox backend (``$ENVBUILDER_SANDBOX``): one shared per name and settings."""

from __future__ import annotations

import os

from envbuilder.errors import SandboxError, did_you_mean
from envbuilder.sandbox._backend import Backend
from envbuilder.sandbox._bwrap import BubblewrapBackend
from envbuilder.sandbox._docker import DockerBackend

#: Environment variable naming the backend (``bubblewrap`` or ``docker``).
BACKEND_ENV = "ENVBUILDER_SANDBOX"
_KNOWN: dict[str, type[Backend]] = {"bubblewrap": BubblewrapBackend, "docker": DockerBackend}


def backend_from_name(name: str | None = None) -> Backend:
    """The backend called ``name`` (default: ``$ENVBUILDER_SANDBOX``, else ``bubblewrap``).

    Raises:
        SandboxError: the name is unknown.
    """
    chosen = name or os.environ.get(BACKEND_ENV) or "bubblewrap"
    cls = _KNOWN.get(chosen)
    if cls is None:
        raise SandboxError(
            f"unknown sandbox backend {chosen!r}",
            hint=did_you_mean(chosen, _KNOWN) or f"Known backends: {', '.join(sorted(_KNOWN))}",
        )
    return cls()


_default: dict[tuple[str | None, ...], Backend] = {}


def default_backend(name: str | None = None) -> Backend:
    """One shared backend per name (``None``: ``$ENVBUILDER_SANDBOX``) and settings (the
    environment variables it reads when made, e.g. ``DOCKER_HOST``)."""
    chosen = name or os.environ.get(BACKEND_ENV) or "bubblewrap"
    cls = _KNOWN.get(chosen)
    key = (chosen, *(os.environ.get(var) for var in (cls.ENV if cls else ())))
    backend = _default.get(key)
    if backend is None:
        backend = _default[key] = backend_from_name(chosen)
    return backend
