"""What can go wrong talking to an ORS server, as one exception tree under EnvbuilderError.

::

    ClientError                   anything the client raises on purpose
    ├── TransportError            the server could not be reached, or kept dropping the connection
    ├── ResponseError             an HTTP error answer: .status, .detail
    │   ├── NotFound              404 on a discovery route; 400 "Invalid split" / "Invalid index"
    │   ├── SessionGone           the session no longer exists (404 on a session route, 410)
    │   ├── InputValidation       422: the server refused the request's shape
    │   └── ServerError           5xx (502/503/504 only after bounded retries)
    ├── ToolCallError             the tool was not run (``ok: false``): .reason, .error
    │   ├── ToolNotFound          reason "not_found"
    │   ├── ToolInputInvalid      reason "input_validation"
    │   └── EpisodeFinished       reason "episode_finished" (``call_tool`` does not raise it:
    │                             the session's ``finished`` turns True, the call is not run)
    └── ToolFailed                the tool raised on the server (an SSE ``error`` event)

The ORS reference server sends no ``reason``; it is then inferred from the error text.
"""

from __future__ import annotations

from envbuilder.errors import EnvbuilderError

__all__ = [
    "ClientError",
    "EpisodeFinished",
    "InputValidation",
    "NotFound",
    "ResponseError",
    "ServerError",
    "SessionGone",
    "ToolCallError",
    "ToolFailed",
    "ToolInputInvalid",
    "ToolNotFound",
    "TransportError",
    "response_error",
    "tool_call_error",
]


class ClientError(EnvbuilderError):
    code = "client_error"


class TransportError(ClientError):
    code = "transport_error"


class ResponseError(ClientError):
    code = "http_error"

    def __init__(self, status: int, detail: str, *, path: str = "", retry_after: str | None = None):
        where = f" from {path}" if path else ""
        super().__init__(f"HTTP {status}{where}: {detail}")
        self.status = status
        self.detail = detail
        self.path = path
        self.retry_after = retry_after
        """The answer's ``Retry-After`` header, if any."""


class NotFound(ResponseError):
    code = "not_found"


class SessionGone(ResponseError):
    code = "session_gone"


class InputValidation(ResponseError):
    code = "input_validation"


class ServerError(ResponseError):
    code = "server_error"


class ToolCallError(ClientError):
    code = "tool_call_error"

    def __init__(self, error: str, reason: str | None = None):
        super().__init__(error)
        self.error = error
        self.reason = reason


class ToolNotFound(ToolCallError):
    code = "tool_not_found"


class ToolInputInvalid(ToolCallError):
    code = "tool_input_invalid"


class EpisodeFinished(ToolCallError):
    code = "episode_finished"


class ToolFailed(ClientError):
    code = "tool_failed"


_NOT_FOUND_DETAILS = frozenset({"Invalid split", "Invalid index", "Invalid index range"})


def response_error(
    status: int, detail: str, *, path: str = "", session_route: bool = False, retry_after: str | None = None
) -> ResponseError:
    """The typed error for an HTTP error answer."""
    # A session route's 404 means the session is unknown, unless the route itself is missing
    # (``{"detail": "Not Found"}``, e.g. /messages on an ors-sdk server).
    if status == 410 or (status == 404 and session_route and detail != "Not Found"):
        return SessionGone(status, detail, path=path, retry_after=retry_after)
    if status == 404 or (status == 400 and detail in _NOT_FOUND_DETAILS):
        return NotFound(status, detail, path=path, retry_after=retry_after)
    if status == 422:
        return InputValidation(status, detail, path=path, retry_after=retry_after)
    if status >= 500:
        return ServerError(status, detail, path=path, retry_after=retry_after)
    return ResponseError(status, detail, path=path, retry_after=retry_after)


_REASONS: dict[str, type[ToolCallError]] = {
    "not_found": ToolNotFound,
    "input_validation": ToolInputInvalid,
    "episode_finished": EpisodeFinished,
}


def _infer_reason(error: str) -> str | None:
    if "is not a valid tool" in error:
        return "not_found"
    if error.startswith("Tool input validation error"):
        return "input_validation"
    if "the episode has finished" in error:
        return "episode_finished"
    if "name collision" in error.lower():
        return "name_collision"
    return None


def tool_call_error(error: str, reason: str | None) -> ToolCallError:
    """The typed error for an ``ok: false`` tool result."""
    reason = reason or _infer_reason(error)
    return _REASONS.get(reason or "", ToolCallError)(error, reason)
