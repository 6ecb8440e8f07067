"""The ``python`` and ``bash`` tools: the agent runs code in the same sandbox as the grader.

Each call runs the agent's code as a file in ``/work`` under the tool's limits and replies
with its output and how it ended. With ``persist: true`` the session keeps a working folder
across calls (files written by one call are there for the next); its state is only the
folder's name, and the folder is deleted when the session ends or expires. Without it each
call starts in a fresh, empty folder.

Working folders live under ``$ENVBUILDER_SANDBOX_WORKDIRS`` (default: a folder in the system's
temporary directory); as root they belong to the sandbox's uid. Their size is checked after
each call: one grown past the disk limit is emptied, and the agent is told.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from envbuilder.errors import SandboxError, ToolError
from envbuilder.isolation.sandbox import BubblewrapBackend, Limits, RunResult, default_backend, run_code
from envbuilder.spec import ParamSpec
from envbuilder.tools._base import Tool, ToolCall, ToolConfig, ToolContext, ToolReply
from envbuilder.tools._container import bash_command, python_command, run_in_container

WORKDIRS_ENV = "ENVBUILDER_SANDBOX_WORKDIRS"
_DIR_NAME = re.compile(r"^session-[a-z0-9_]{8,64}$")


class CodeToolConfig(ToolConfig):
    """Run code in the sandbox (no network; limited time, memory, processes and output)."""

    limits: Limits = Field(default_factory=lambda: Limits(wall_seconds=10, cpu_seconds=10))
    """What each call may use."""
    persist: bool = False
    """Keep a working folder for the session: files stay between calls."""
    backend: Literal["bubblewrap", "docker"] | None = None
    """The sandbox; default `$ENVBUILDER_SANDBOX`, else `bubblewrap`."""


class PythonToolConfig(CodeToolConfig):
    """Run Python 3 code in a sandbox; its printed output is the reply."""

    type: Literal["python"]


class BashToolConfig(CodeToolConfig):
    """Run a bash script in a sandbox; its output is the reply."""

    type: Literal["bash"]


def workdirs_root() -> Path:
    """Where session working folders go (``$ENVBUILDER_SANDBOX_WORKDIRS``)."""
    configured = os.environ.get(WORKDIRS_ENV)
    return Path(configured) if configured else Path(tempfile.gettempdir()) / "envbuilder-sandbox"


class _CodeTool(Tool):
    config: CodeToolConfig
    blocking = True
    reads_input = frozenset({"code"})
    file: ClassVar[str]
    command: ClassVar[tuple[str, ...]]
    language: ClassVar[Literal["python", "bash"]]

    def __init__(self, config: CodeToolConfig, context: ToolContext):
        super().__init__(config, context)
        self._backend = default_backend(config.backend)

    @property
    def uses_sandbox(self) -> bool:
        """In a spec with a `sandbox:`, calls run in the session's container (unless the tool
        names its own `backend:`)."""
        return self.context.containers is not None and self.config.backend is None

    async def run(self, call: ToolCall) -> ToolReply:
        if call.workspace is not None:
            code = str(call.args["code"])
            make = python_command if self.language == "python" else bash_command
            command = make(code, call.workspace.spec.workdir)
            result = await run_in_container(call.workspace, command, self.config.limits)
            return ToolReply.text(_reply_text(result), **result.to_dict(tail=1000))
        workdir = self._workdir(call.state) if self.config.persist else None
        if workdir is not None:
            await asyncio.to_thread(_remove, workdir / self.file)  # whatever the agent left there
        code = str(call.args["code"])
        try:
            result = await run_code(
                self.command,
                {self.file: code.encode()},
                self.config.limits,
                backend=self._backend,
                key=call.state.get("workdir"),
                workdir=workdir,
            )
        except SandboxError as exc:
            raise ToolError(f"the sandbox could not run the code: {exc}") from None
        note = ""
        if workdir is not None and await asyncio.to_thread(self._over_disk, workdir):
            note = f"\n[the working folder grew past {self.config.limits.disk_mb} MB and was emptied]"
        return ToolReply.text(_reply_text(result) + note, **result.to_dict(tail=1000))

    def _over_disk(self, workdir: Path) -> bool:
        """Drop the code file; empty the folder when it holds more than the disk limit."""
        _remove(workdir / self.file)
        if _size(workdir) <= self.config.limits.disk_mb * 1024 * 1024:
            return False
        for child in workdir.iterdir():
            _remove(child)
        return True

    def _workdir(self, state: dict[str, Any]) -> Path:
        root = workdirs_root()
        name = state.get("workdir")
        if isinstance(name, str) and _DIR_NAME.match(name) and (root / name).is_dir():
            return root / name
        root.mkdir(mode=0o711, parents=True, exist_ok=True)
        path = Path(tempfile.mkdtemp(prefix="session-", dir=root))
        if isinstance(self._backend, BubblewrapBackend) and self._backend.root:
            os.chown(path, self._backend.uid, self._backend.uid)
        state["workdir"] = path.name  # a name, not the path: the state stays small JSON
        return path

    async def end_session(self, state: dict[str, Any]) -> None:
        name = state.get("workdir")
        if isinstance(name, str) and _DIR_NAME.match(name):
            await asyncio.to_thread(shutil.rmtree, workdirs_root() / name, True)


class PythonTool(_CodeTool):
    Config = PythonToolConfig
    description = (
        "Run Python 3 code in a sandbox without network access and reply with what it printed "
        "(stdout, then stderr) and how it ended. Use print() to see values."
    )
    default_input: ClassVar[dict[str, ParamSpec]] = {
        "code": ParamSpec(description="The Python code to run.", max_length=20_000)
    }
    file = "_cell.py"
    command = ("python3", "-I", "_cell.py")
    language = "python"


class BashTool(_CodeTool):
    Config = BashToolConfig
    description = (
        "Run a bash script in a sandbox without network access and reply with its output "
        "(stdout, then stderr) and how it ended."
    )
    default_input: ClassVar[dict[str, ParamSpec]] = {
        "code": ParamSpec(description="The bash script to run.", max_length=20_000)
    }
    file = "_cell.sh"
    command = ("bash", "_cell.sh")
    language = "bash"


def _reply_text(result: RunResult) -> str:
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if not result.ok:
        parts.append(f"[{result.describe()}]")
    return "\n".join(parts) if parts else "[no output]"


def _size(path: Path, limit: int = 100_000) -> int:
    """Bytes in the files under ``path`` (a bounded walk: past ``limit`` entries, counted as huge)."""
    total, seen = 0, 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in filenames:
            seen += 1
            if seen > limit:
                return 1 << 62
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
        seen += len(dirnames)
    return total


def _remove(path: Path) -> None:
    """Delete a file, a symlink (not its target) or a folder tree, if there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
