"""What every sandbox backend provides, and how the server picks one.

A backend runs a command over a few files in an isolated, limited place and reports what
happened (:class:`RunResult`). It raises :class:`~envbuilder.errors.SandboxError` only when it
cannot run anything at all (engine missing, refused, broken): graders turn that into an
ungradeable grade, never a 0. There is deliberately no backend that runs code unisolated.
"""

from __future__ import annotations

import abc
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from envbuilder.errors import SandboxError, did_you_mean
from envbuilder.sandbox._result import Limits, RunResult

#: Environment variable naming the backend (``bubblewrap`` or ``docker``).
BACKEND_ENV = "ENVBUILDER_SANDBOX"
_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
# Every run gets these; nothing of the server's own environment reaches the code.
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/work",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}


class Backend(abc.ABC):
    """An isolation engine that runs commands under :class:`Limits`."""

    name: ClassVar[str]

    async def run(
        self,
        command: Sequence[str],
        files: Mapping[str, bytes],
        limits: Limits,
        *,
        workdir: Path | None = None,
    ) -> RunResult:
        """Run ``command`` in ``/work`` holding ``files`` (name → content).

        ``workdir`` is a host folder mounted as ``/work`` (kept between runs, e.g. a session's);
        without it ``/work`` is a fresh, empty, size-limited folder.

        Raises:
            SandboxError: the engine could not run the command at all.
        """
        check_file_names(files)
        if not command:
            raise SandboxError("the sandbox was given an empty command")
        return await self._run(command, files, limits, workdir)

    @abc.abstractmethod
    async def _run(
        self, command: Sequence[str], files: Mapping[str, bytes], limits: Limits, workdir: Path | None
    ) -> RunResult:
        """:meth:`run` in this engine, once the file names and the command are checked."""

    def describe(self) -> str:
        """One line naming the backend and how it isolates (for logs and errors)."""
        return self.name


def check_file_names(files: Mapping[str, bytes]) -> None:
    """Refuse file names that are not a plain name in ``/work`` (no folders, no ``..``)."""
    for name in files:
        if not _FILE_NAME.match(name):
            raise ValueError(f"sandbox file name {name!r} must be a plain name like main.py")


def backend_from_name(name: str | None = None) -> Backend:
    """The backend called ``name`` (default: ``$ENVBUILDER_SANDBOX``, else ``bubblewrap``).

    Raises:
        SandboxError: the name is unknown.
    """
    from envbuilder.sandbox._bwrap import BubblewrapBackend
    from envbuilder.sandbox._docker import DockerBackend

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
