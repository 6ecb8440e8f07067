"""Tools in the session's container (a spec's `sandbox:`): bash and python calls, and the file
tools agents expect: `read_file` (numbered lines, a range), `write_file`, and `edit_file` (an exact
string replaced once, or a range of lines replaced).

The container keeps the session's state between calls: its files, the processes a call left in
the background, and the shell's working folder (each bash call starts where the last one ended).
Every call runs as the sandbox's uid, so a file tool can read or change only what a shell
command could.
"""

from __future__ import annotations

import shlex
from typing import ClassVar, Literal

from pydantic import Field

from envbuilder.errors import SandboxError, ToolError
from envbuilder.isolation.sandbox import Limits, RunResult, Workspace
from envbuilder.spec import ParamSpec
from envbuilder.tools._base import Tool, ToolCall, ToolConfig, ToolContext, ToolReply

#: Where a bash call leaves its working folder for the next one (the agent's own folder).
_CWD = "/tmp/.envbuilder/cwd"
_MAX_FILE = 1_000_000


def bash_command(code: str, workdir: str) -> list[str]:
    """A bash call that starts in the last call's folder and records where it ends."""
    folder = shlex.quote(workdir)
    prelude = (
        f'cd "$(cat {_CWD} 2>/dev/null || echo {folder})" 2>/dev/null || cd {folder}\n'
        f"trap 'pwd >{_CWD} 2>/dev/null' EXIT\n"
    )
    return ["bash", "-c", prelude + code]


def python_command(code: str, workdir: str) -> list[str]:
    """A python call in the shell's current folder (its files stay; its variables do not)."""
    folder = shlex.quote(workdir)
    return [
        "sh",
        "-c",
        f'cd "$(cat {_CWD} 2>/dev/null || echo {folder})" 2>/dev/null; exec python3 -c "$0"',
        code,
    ]


async def run_in_container(workspace: Workspace, command: list[str], limits: Limits) -> RunResult:
    """Run a tool's command in the session's container under the tool's wall time and output."""
    try:
        name = await workspace.ensure()
        return await workspace.containers.exec(
            name,
            command,
            timeout=workspace.wall_seconds(limits.wall_seconds),
            output_bytes=limits.output_bytes,
            workdir=workspace.spec.workdir,
        )
    except SandboxError as exc:
        raise ToolError(f"the session's container could not run the call: {exc}") from None


class _FileToolConfig(ToolConfig):
    """A file tool of the session's container (needs a `sandbox:`)."""

    max_file_kb: int = Field(default=1024, ge=1, le=1024)
    """The largest file the tool reads or writes, in KiB."""


class ReadFileConfig(_FileToolConfig):
    """Show a file of the session's container with line numbers (all of it, or a range)."""

    type: Literal["read_file"]


class WriteFileConfig(_FileToolConfig):
    """Write a whole file in the session's container (folders made as needed)."""

    type: Literal["write_file"]


class EditFileConfig(_FileToolConfig):
    """Edit a file of the session's container: replace an exact string (which must occur once),
    or replace a range of lines."""

    type: Literal["edit_file"]


_PATH = ParamSpec(
    description="The file's path: absolute, or relative to the working folder.", max_length=4096
)


class _FileTool(Tool):
    config: _FileToolConfig
    blocking = True
    reads_input: ClassVar[frozenset[str]] = frozenset({"path"})

    def __init__(self, config: _FileToolConfig, context: ToolContext):
        super().__init__(config, context)
        if context.containers is None:
            raise ToolError(
                f"the {config.type} tool works in the session's container: the spec needs a `sandbox:`",
                loc=("type",),
                code="tool_needs_sandbox",
            )

    @property
    def uses_sandbox(self) -> bool:
        return True

    def _path(self, call: ToolCall) -> str:
        path = str(call.args["path"]).strip()
        if not path or "\0" in path:
            raise ToolError("the path is empty")
        return path

    async def _read(self, workspace: Workspace, path: str) -> str:
        limit = self.config.max_file_kb * 1024
        try:
            name = await workspace.ensure()
            data = await workspace.containers.read(name, path, limit)
        except SandboxError as exc:
            raise ToolError(f"the session's container could not read the file: {exc}") from None
        except OSError as exc:
            raise ToolError(f"{path}: {exc}") from None
        if len(data) > limit:
            raise ToolError(f"{path} is larger than {self.config.max_file_kb} KiB")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{path} is not UTF-8 text") from None

    async def _write(self, workspace: Workspace, path: str, text: str) -> None:
        data = text.encode("utf-8")
        if len(data) > self.config.max_file_kb * 1024:
            raise ToolError(f"the new text is larger than {self.config.max_file_kb} KiB")
        try:
            name = await workspace.ensure()
            await workspace.containers.write(name, path, data)
        except SandboxError as exc:
            raise ToolError(f"the session's container could not write the file: {exc}") from None
        except OSError as exc:
            raise ToolError(f"{path}: {exc}") from None


def _workspace(call: ToolCall) -> Workspace:
    assert call.workspace is not None, "the toolbox gives a sandbox tool its workspace"
    return call.workspace


class ReadFileTool(_FileTool):
    Config = ReadFileConfig
    description = "Show a file with numbered lines; give start_line and end_line for a part of it."
    default_input: ClassVar[dict[str, ParamSpec]] = {
        "path": _PATH,
        "start_line": ParamSpec(
            type="integer", description="First line to show (1-based).", minimum=1, required=False
        ),
        "end_line": ParamSpec(
            type="integer", description="Last line to show (inclusive).", minimum=1, required=False
        ),
    }

    async def run(self, call: ToolCall) -> ToolReply:
        path = self._path(call)
        lines = (await self._read(_workspace(call), path)).splitlines()
        start = int(call.args.get("start_line") or 1)
        end = int(call.args.get("end_line") or len(lines))
        if lines and start > len(lines):
            raise ToolError(f"{path} has {len(lines)} lines; start_line {start} is past its end")
        shown = [f"{n:6d}\t{line}" for n, line in enumerate(lines[start - 1 : end], start)]
        return ToolReply.text("\n".join(shown) if shown else f"[{path} is empty]", lines=len(lines))


class WriteFileTool(_FileTool):
    Config = WriteFileConfig
    description = "Write a file whole (it is created, or replaced), making its folders."
    default_input: ClassVar[dict[str, ParamSpec]] = {
        "path": _PATH,
        "content": ParamSpec(description="The file's new content.", max_length=_MAX_FILE),
    }
    reads_input: ClassVar[frozenset[str]] = frozenset({"path", "content"})

    async def run(self, call: ToolCall) -> ToolReply:
        path = self._path(call)
        text = str(call.args["content"])
        await self._write(_workspace(call), path, text)
        return ToolReply.text(f"wrote {path} ({len(text.encode()):,} bytes)")


class EditFileTool(_FileTool):
    Config = EditFileConfig
    description = (
        "Edit a file: replace old_text (which must occur exactly once) with new_text; or, with "
        "start_line and end_line instead of old_text, replace those lines (inclusive) with new_text."
    )
    default_input: ClassVar[dict[str, ParamSpec]] = {
        "path": _PATH,
        "new_text": ParamSpec(description="The replacement text.", max_length=_MAX_FILE),
        "old_text": ParamSpec(
            description="The exact text to replace (occurring once).", max_length=_MAX_FILE, required=False
        ),
        "start_line": ParamSpec(
            type="integer", description="First line to replace (1-based).", minimum=1, required=False
        ),
        "end_line": ParamSpec(
            type="integer", description="Last line to replace (inclusive).", minimum=1, required=False
        ),
    }
    reads_input: ClassVar[frozenset[str]] = frozenset({"path", "new_text"})

    async def run(self, call: ToolCall) -> ToolReply:
        path = self._path(call)
        workspace = _workspace(call)
        text = await self._read(workspace, path)
        new = str(call.args["new_text"])
        old, start, end = call.args.get("old_text"), call.args.get("start_line"), call.args.get("end_line")
        if old is not None and (start is not None or end is not None):
            raise ToolError("give old_text, or start_line and end_line, not both")
        if old is not None:
            edited, where = _replace_once(text, str(old), new, path)
        elif start is not None:
            edited, where = _replace_lines(
                text, int(start), int(end if end is not None else start), new, path
            )
        else:
            raise ToolError("give old_text (the exact text to replace), or start_line and end_line")
        await self._write(workspace, path, edited)
        return ToolReply.text(f"edited {path} at line {where}", line=where)


def _replace_once(text: str, old: str, new: str, path: str) -> tuple[str, int]:
    """``text`` with its one ``old`` replaced by ``new``, and the line where it was."""
    if not old:
        raise ToolError("old_text is empty")
    count = text.count(old)
    if count == 0:
        raise ToolError(f"old_text does not occur in {path} (it must match exactly, whitespace included)")
    if count > 1:
        raise ToolError(f"old_text occurs {count} times in {path}; include more context so it occurs once")
    at = text.index(old)
    return text[:at] + new + text[at + len(old) :], text.count("\n", 0, at) + 1


def _replace_lines(text: str, start: int, end: int, new: str, path: str) -> tuple[str, int]:
    lines = text.splitlines(keepends=True)
    if end < start:
        raise ToolError(f"end_line {end} is before start_line {start}")
    if start > len(lines) + 1:
        raise ToolError(f"{path} has {len(lines)} lines; start_line {start} is past its end")
    replacement = new if not new or new.endswith("\n") else new + "\n"
    return "".join([*lines[: start - 1], replacement, *lines[end:]]), start
