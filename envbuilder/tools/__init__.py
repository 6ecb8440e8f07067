"""Tools beside ``submit``: a registry of tool types keyed by the YAML ``type:``.

See :mod:`envbuilder.tools._base` for the interface a tool type implements (config, one call,
per-session state, blocking, end-of-session cleanup) and how a package registers one.
:class:`Steps` runs declarative steps (a ``Step`` list from a spec) against any world document,
whoever makes the call (:mod:`envbuilder.tools._steps`).
"""

from envbuilder.spec import ParamSpec, input_model
from envbuilder.tools._base import Tool, ToolCall, ToolConfig, ToolContext, ToolReply, tools
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
