"""What every sandbox backend provides (the server picks one in ``_select``).

A backend runs a command over a few files in an isolated, limited place and reports what
happened (:class:`RunResult`). It raises :class:`~envbuilder.errors.SandboxError` only when it
cannot run anything at all (engine missing, refused, broken): graders turn that into an
ungradeable grade, never a 0. There is deliberately no backend that runs code unisolated.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from envbuilder.errors import SandboxError
from envbuilder.isolation.sandbox._result import Limits, RunResult

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
    #: The environment variables the backend reads when it is made (``default_backend`` keeps
    #: one backend per name and values of these).
    ENV: ClassVar[tuple[str, ...]] = ()

    async def run(
        self,
        command: Sequence[str],
        files: Mapping[str, bytes],
        limits: Limits,
        *,
        workdir: Path | None = None,
    ) -> RunResult:
        """Run ``command`` in ``/work`` holding ``files`` (name → content).

        ``/work`` is a fresh, empty, size-limited folder. With ``workdir`` (a host folder kept
        between runs, e.g. a session's) it starts with that folder's files, and the folder
        receives what ``/work`` holds when the run ends by itself (only what fit the limit).

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
