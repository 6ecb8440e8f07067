"""Tools beside ``submit``: a registry of tool types keyed by the YAML ``type:``.

See :mod:`envbuilder.tools._base` for the interface a tool type implements (config, one call,
per-session state, blocking, end-of-session cleanup) and how a package registers one.
"""

from envbuilder.spec import ParamSpec, input_model
from envbuilder.tools._base import Tool, ToolCall, ToolConfig, ToolContext, ToolReply, tools

__all__ = [
    "ParamSpec",
    "Tool",
    "ToolCall",
    "ToolConfig",
    "ToolContext",
    "ToolReply",
    "input_model",
    "tools",
]
