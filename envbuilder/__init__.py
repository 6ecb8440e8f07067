"""envbuilder: declare an LLM-agent environment in YAML and serve it over ORS."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envbuilder._version import __version__

__all__ = [
    "EnvbuilderError",
    "Environment",
    "Episode",
    "SpecError",
    "__version__",
    "load_environment",
    "load_spec",
]

# Imported on first use (PEP 562) so that `envbuilder --version` and light commands start fast.
_LAZY = {
    "Environment": "envbuilder.environment",
    "load_environment": "envbuilder.environment",
    "Episode": "envbuilder.episode",
    "EnvbuilderError": "envbuilder.errors",
    "SpecError": "envbuilder.errors",
    "load_spec": "envbuilder.spec",
}

if TYPE_CHECKING:
    from envbuilder.environment import Environment, load_environment
    from envbuilder.episode import Episode
    from envbuilder.errors import EnvbuilderError, SpecError
    from envbuilder.spec import load_spec


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'envbuilder' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
