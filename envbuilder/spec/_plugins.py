"""The plugin kinds a spec names by `type:`: their registries and the base of each config.

A spec's `dataset:`, `grader:` and `tools:` blocks are validated with the config model of the
plugin their `type:` names. The registries live here, below every plugin, so that `spec` never
imports `data`, `graders` or `tools`: a plugin package (built-in or third-party) imports its
config base from here and registers through its entry-point group, and a spec's tagged unions
load only the plugins a spec names (``envbuilder/plugins.py``, :class:`PluginField`).
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from pydantic import Field

from envbuilder.plugins import ConfigModel, Registry
from envbuilder.spec._params import ParamName, ParamSpec

__all__ = [
    "TOOL_NAME_PATTERN",
    "GraderConfig",
    "SourceConfig",
    "ToolConfig",
    "api_root",
    "graders",
    "parse_slice",
    "sources",
    "tools",
]


class SourceConfig(ConfigModel):
    """Base of a `dataset:` block; `type:` picks the source."""

    type: str


class GraderConfig(ConfigModel):
    """Base of a `grader:` block; `type:` picks the grader."""

    type: str


TOOL_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"


class ToolConfig(ConfigModel):
    """Base of an entry of `tools:`; `type:` picks the tool type."""

    type: str
    name: str | None = Field(default=None, pattern=TOOL_NAME_PATTERN)
    """The tool's name, as the agent calls it (default: the type's name). Unique in a spec."""
    description: str | None = None
    """What the tool does, shown to the model (default: the type's own description)."""
    input: dict[ParamName, ParamSpec] | None = None
    """The tool's parameters by name, each with its type, description and bounds; they become
    the input schema offered to the model, and calls that break it are refused with the
    schema's message. Default: the type's own parameters."""
    max_calls: int | None = Field(default=None, ge=1)
    """How many times an episode may call the tool; later calls are refused (as an error
    output, without running the tool)."""
    cost: float = Field(default=0.0, ge=0)
    """Reward taken off the episode's final reward for each call that runs (a hint that costs;
    a call that fails is not charged)."""
    task_scoped: bool = False
    """List the tool only in the session's `/task_tools`, not in `/tools` (the ORS
    `shared=False` tools: they belong to the task). It is callable either way."""
    only_for: str | None = None
    """A task field: the tool exists only for tasks where it is set and not empty (a `hint`
    column some rows fill). Such a tool is listed in those sessions' `/task_tools` only."""
    terminal: bool = False
    """A call ends the episode (its output has `finished: true`) with the reward earned so far
    (none when nothing was graded)."""
    max_output_chars: int = Field(default=8000, ge=1, le=1_000_000)
    """Longer outputs are cut to this many characters (and say so)."""


_SLICE = re.compile(r"^\[\s*(?P<a>-?\d+(?:\.\d+)?%?)?\s*:\s*(?P<b>-?\d+(?:\.\d+)?%?)?\s*\]$")


def parse_slice(text: str) -> tuple[str | None, str | None]:
    """Check ``[start:stop]`` (rows or percentages) and return its two bounds; ValueError if bad."""
    m = _SLICE.match(text.strip())
    if not m:
        raise ValueError("expected `[start:stop]` in rows or percent, e.g. `[:1000]` or `[10%:20%]`")
    for bound in (m["a"], m["b"]):
        if bound and not bound.endswith("%") and "." in bound:
            raise ValueError("a row bound must be a whole number; use `%` for fractions")
    return m["a"], m["b"]


def url_problem(url: str) -> str | None:
    """What keeps ``url`` from being a model endpoint's or a server's address, or None: an http
    or https scheme, a host and a numeric port (the rule of :func:`api_root` and of every
    command-line option that takes an endpoint)."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a port that is not a number, a bracket left open
        return f"is not a URL ({exc})"
    if parts.scheme.lower() not in ("http", "https") or "://" not in url:
        return "must start with http:// or https://"
    if not parts.hostname:
        return "has no host"
    return None if port != 0 else "has port 0"


def api_root(value: str) -> str:
    """A model endpoint's ``base_url`` as validated everywhere one is given: http(s), no trailing
    slash."""
    problem = url_problem(value)
    if problem is not None:
        raise ValueError(f"base_url {problem}")
    return value.rstrip("/")


sources: Registry[Any] = Registry("source", "envbuilder.sources")
"""The dataset sources, by YAML ``type:`` (typed in ``envbuilder.data``)."""
graders: Registry[Any] = Registry("grader", "envbuilder.graders")
"""The graders, by YAML ``type:`` (typed in ``envbuilder.graders``)."""
tools: Registry[Any] = Registry("tool", "envbuilder.tools")
"""The tool types, by YAML ``type:`` (typed in ``envbuilder.tools``)."""
