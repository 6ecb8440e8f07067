"""Tools beside ``submit``: a registry of tool types keyed by the YAML ``type:``.

See :mod:`envbuilder.tools._base` for the interface a tool type implements (config, one call,
per-session state, blocking, end-of-session cleanup) and how a package registers one.
:class:`Steps` runs declarative steps (a ``Step`` list from a spec) against any world document,
whoever makes the call (:mod:`envbuilder.tools._steps`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envbuilder.spec import ParamSpec, input_model
from envbuilder.tools._base import Tool, ToolCall, ToolConfig, ToolContext, ToolReply, tools

if TYPE_CHECKING:
    from envbuilder.tools._steps import Step, Steps

__all__ = [
    "ParamSpec",
    "Step",
    "Steps",
    "Tool",
    "ToolCall",
    "ToolConfig",
    "ToolContext",
    "ToolReply",
    "input_model",
    "tools",
]


def __getattr__(name: str) -> Any:
    """``Step`` and ``Steps`` on first use: their models cost every start-up, and only a spec
    with a ``state`` tool (which imports them itself) uses them."""
    if name not in ("Step", "Steps"):
        raise AttributeError(f"module 'envbuilder.tools' has no attribute {name!r}")
    from envbuilder.tools import _steps

    value = getattr(_steps, name)
    globals()[name] = value
    return value
