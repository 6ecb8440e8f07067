"""How the server picks a sandbox backend: by name, from ``$ENVBUILDER_SANDBOX``, one shared per name."""

from __future__ import annotations

import os

from envbuilder.errors import SandboxError, did_you_mean
from envbuilder.sandbox._backend import Backend
from envbuilder.sandbox._bwrap import BubblewrapBackend
from envbuilder.sandbox._docker import DockerBackend

#: Environment variable naming the backend (``bubblewrap`` or ``docker``).
BACKEND_ENV = "ENVBUILDER_SANDBOX"


def backend_from_name(name: str | None = None) -> Backend:
    """The backend called ``name`` (default: ``$ENVBUILDER_SANDBOX``, else ``bubblewrap``).

    Raises:
        SandboxError: the name is unknown.
    """
    known: dict[str, type[Backend]] = {"bubblewrap": BubblewrapBackend, "docker": DockerBackend}
    chosen = name or os.environ.get(BACKEND_ENV) or "bubblewrap"
    cls = known.get(chosen)
    if cls is None:
        raise SandboxError(
            f"unknown sandbox backend {chosen!r}",
            hint=did_you_mean(chosen, known) or f"Known backends: {', '.join(sorted(known))}",
        )
    return cls()


_default: dict[str | None, Backend] = {}


def default_backend(name: str | None = None) -> Backend:
    """One shared backend per name (``None``: the configured default)."""
    backend = _default.get(name)
    if backend is None:
        backend = _default[name] = backend_from_name(name)
    return backend
