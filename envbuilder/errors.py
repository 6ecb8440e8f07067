"""The one exception tree of envbuilder, with stable error codes and source locations.

Every error envbuilder raises on purpose derives from :class:`EnvbuilderError`::

    EnvbuilderError              code, message, hint, loc; str() is the user-facing text
    ├── SpecError                a spec is invalid; .problems lists every problem at once
    ├── DataError                a dataset cannot be opened or read
    │   └── TaskNotFound         a split or index that the environment does not have
    ├── TemplateError            a template fails to parse, escapes the sandbox, or fails to render
    ├── GraderError              a grader is misconfigured or cannot run
    ├── SandboxError             the code sandbox cannot run anything (engine missing or broken)
    ├── ToolError                a tool is misconfigured, or one call of it fails (that call's
    │                            output then says so; it never becomes an HTTP error)
    └── RequestRejected          the server refuses an HTTP request; .status is its HTTP status

Each boundary translates these exactly once: the CLI prints ``str(error)`` without a
traceback (exit 1; an ``OSError`` on a named file, e.g. an ``--out`` it cannot write, becomes
:func:`file_error` there), the server answers ``{"detail": str(error)}`` with the error's status.
Messages say what is wrong, where, the bad value, what was expected, and a hint.
"""

from __future__ import annotations

import difflib
import errno
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DataError",
    "EnvbuilderError",
    "GraderError",
    "Loc",
    "Problem",
    "RequestRejected",
    "SandboxError",
    "SpecError",
    "TaskNotFound",
    "TemplateError",
    "ToolError",
    "did_you_mean",
    "file_error",
    "format_loc",
    "name_hint",
]


#: A key path in a spec: ``("graders", 1, "pattern")`` is ``graders[1].pattern``.
Loc = tuple[str | int, ...]


def did_you_mean(value: str, choices: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """A "Did you mean …?" hint for an unknown name, or None when nothing is close."""
    names = list(choices)
    close = difflib.get_close_matches(value, names, n=1, cutoff=cutoff)
    if not close and len(value) >= 2:
        # An abbreviation: `uid` for `unique_id` (same first letter, the letters in order).
        close = [n for n in names if n[:1].lower() == value[:1].lower() and _in_order(value, n)]
        close = close if len(close) == 1 else []
    return f"Did you mean {close[0]!r}?" if close else None


def _in_order(letters: str, word: str) -> bool:
    rest = iter(word.lower())
    letters = letters.lower()
    return all(letter in rest for letter in letters)


def name_hint(value: str, names: Sequence[str], label: str) -> str:
    """The hint for an unknown name: ``Did you mean 'level'?`` when one is close, else the
    names there are (``Its columns are: a, b``, with ``label="Its columns are"``). Column names
    are often alike (`solution`, `question`), so only a closer match than for keys is offered."""
    return did_you_mean(value, names, cutoff=0.75) or f"{label}: {', '.join(names)}"


def format_loc(loc: Sequence[str | int]) -> str:
    """Render a key path as YAML authors read it: ``graders[1].pattern``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Problem:
    """One located problem in a spec: the unit of ``envbuilder validate`` output."""

    code: str
    message: str
    loc: Loc = ()
    file: str | None = None
    line: int | None = None
    col: int | None = None
    value: Any = field(default=None, compare=False)
    has_value: bool = False
    hint: str | None = None

    def where(self) -> str:
        """``file:line:col`` (as much of it as is known)."""
        parts = [self.file or "<spec>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.col is not None:
                parts.append(str(self.col))
        return ":".join(parts)

    def __str__(self) -> str:
        text = self.where()
        key = format_loc(self.loc)
        if key:
            text += f" {key}"
        text += f": {self.message}"
        if self.has_value:
            text += f" (got {_short(self.value)})"
        if self.hint:
            text += f". {self.hint}" if not self.hint.startswith("Did you") else f" {self.hint}"
        return text


class EnvbuilderError(Exception):
    """Base of every deliberate envbuilder error. ``loc`` is the key path, inside the spec block
    being built, of what is wrong (a grader's or tool's config); the caller prefixes the
    block's own path when it locates the problem in the file."""

    code = "envbuilder_error"

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        code: str | None = None,
        loc: tuple[str | int, ...] = (),
    ):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.loc = loc
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.message}. {self.hint}" if self.hint else self.message


class SpecError(EnvbuilderError):
    """A spec file is invalid. ``problems`` holds every problem found, each located."""

    code = "spec_invalid"

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def __str__(self) -> str:
        return self.message


class DataError(EnvbuilderError):
    """A dataset cannot be opened or read."""

    code = "data_error"


class TaskNotFound(DataError):
    """A split or index the environment does not have (HTTP 400 ``Invalid split``/``Invalid index``)."""

    code = "task_not_found"


class TemplateError(EnvbuilderError):
    """A template fails to parse, tries to escape the sandbox, or fails to render."""

    code = "template_error"


class GraderError(EnvbuilderError):
    """A grader is misconfigured or cannot run."""

    code = "grader_error"


class SandboxError(EnvbuilderError):
    """The code sandbox cannot run anything: its engine is missing, refused, or broken.

    Not raised for what the code itself does (a crash, a timeout): those are run results.
    """

    code = "sandbox_unavailable"


class ToolError(EnvbuilderError):
    """A tool is misconfigured (``loc`` is the key path inside its block), or a call of it
    fails: the agent then gets the message as the call's error output."""

    code = "tool_error"


class RequestRejected(EnvbuilderError):
    """The server refuses an HTTP request (it breaks the protocol, names nothing we have, or
    comes when the server is full); answered as ``{"detail": message}`` with ``.status``.

    Server side only: a client that cannot reach a server sees ``httpx.RequestError``, and a
    client that gets this answer raises :class:`envbuilder.client.ClientError`.
    """

    code = "bad_request"

    def __init__(self, status: int, detail: str, *, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.status = status
        self.headers = headers or {}

    def __str__(self) -> str:
        return self.message


#: The former name of :class:`RequestRejected` (it read as httpx's transport error, which means
#: the opposite); kept so code that imported it keeps working, and left out of ``__all__``.
RequestError = RequestRejected


_FILE_HINTS = {
    errno.EACCES: "Choose a path you may write to, or change its permissions",
    errno.EPERM: "Choose a path you may write to, or change its permissions",
    errno.EROFS: "That file system is read-only; choose a path elsewhere",
    errno.ENOSPC: "The disk is full; free some space or choose a path elsewhere",
    errno.EISDIR: "It is a folder; give a file's path",
    errno.ENOENT: "Check the path: its folder must exist, or be one that can be made",
}


def file_error(exc: OSError, doing: str = "use") -> EnvbuilderError:
    """An ``OSError`` on a named file as a message to act on: ``cannot write the results file
    runs/a.jsonl/x.jsonl: Not a directory (ENOTDIR). runs/a.jsonl is a file, not a folder``.
    ``doing`` is what was being done to the file (``write the results file``)."""
    path = str(exc.filename) if exc.filename is not None else "a file"
    reason = exc.strerror or str(exc)
    if exc.errno is not None and exc.errno in errno.errorcode:
        reason += f" ({errno.errorcode[exc.errno]})"
    hint = _FILE_HINTS.get(exc.errno or 0, "Check the path")
    if exc.errno in (errno.ENOTDIR, errno.EEXIST) and exc.filename is not None:
        # a folder on the path is a file (EEXIST: from making that folder)
        part = os.fspath(exc.filename)
        part = part if exc.errno == errno.EEXIST else os.path.dirname(part)
        while part and not os.path.isfile(part) and os.path.dirname(part) != part:
            part = os.path.dirname(part)
        if part and os.path.isfile(part):
            hint = f"{part} is a file, not a folder"
    return EnvbuilderError(f"cannot {doing} {path}: {reason}", hint=hint, code="file_error")
