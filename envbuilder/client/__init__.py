"""An ORS client (sync and async, over httpx) and provider message/tool formats.

``Client``/``AsyncClient`` → ``.environment(name)`` (discovery) → ``.session(...)`` (an episode:
prompt, messages, tools, tool calls). ``convert_messages``/``convert_tools`` work without a server.
"""

from envbuilder.client._async import AsyncClient, AsyncRemoteEnvironment, AsyncSession
from envbuilder.client._errors import (
    ClientError,
    EpisodeFinished,
    InputValidation,
    NotFound,
    ResponseError,
    ServerError,
    SessionGone,
    ToolCallError,
    ToolFailed,
    ToolInputInvalid,
    ToolNotFound,
    TransportError,
)
from envbuilder.client._formats import convert_messages, convert_tools
from envbuilder.client._sync import Client, RemoteEnvironment, Session
from envbuilder.retry import RetryPolicy

__all__ = [
    "AsyncClient",
    "AsyncRemoteEnvironment",
    "AsyncSession",
    "Client",
    "ClientError",
    "EpisodeFinished",
    "InputValidation",
    "NotFound",
    "RemoteEnvironment",
    "ResponseError",
    "RetryPolicy",
    "ServerError",
    "Session",
    "SessionGone",
    "ToolCallError",
    "ToolFailed",
    "ToolInputInvalid",
    "ToolNotFound",
    "TransportError",
    "convert_messages",
    "convert_tools",
]
