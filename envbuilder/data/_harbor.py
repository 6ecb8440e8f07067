"""Harbor task directories as a dataset (``type: harbor``): a folder of them per source split.

A Harbor task directory (the format of terminal-bench and of the harbor package) holds::

    instruction.md          what the agent is asked (leading canary comment lines stripped)
    task.toml               [verifier] timeout_sec/user/env, [agent] timeout_sec, [environment] ...
    environment/Dockerfile  the task's image (and its build context)
    tests/test.sh           run after the agent, writing /logs/verifier/reward.txt or reward.json
    solution/solve.sh       the oracle: a script that solves the task

Each task directory becomes one row (directories sorted by name):

- ``id``: ``[task] name`` of task.toml, else the directory's name;
- ``instruction``: the instruction, as Harbor shows it to the agent;
- ``environment``: the build context folder, relative to the spec's folder where it lies under
  it (``sandbox: build: {context_field: environment}`` builds each task's image from it);
- ``tests``: the tests folder as a tar, base64 text (the ``harbor_tests`` grader runs it);
- ``verifier``: JSON text of ``{timeout_sec, user, env}`` from ``[verifier]``;
- ``oracle``: JSON text of the gold calls that solve the task (``gold_actions: oracle``): one
  ``bash`` call running ``solve.sh`` (the solution folder's other files unpacked beside it);
- ``solution``: the solution folder as a tar, base64 text; ``config``: task.toml's text;
- ``agent_timeout_sec``: ``[agent] timeout_sec`` (null when not given);
- ``limits``: JSON text of the task's own limits, ``{cpus, memory_mb, storage_mb,
  agent_timeout_sec}`` from ``[environment]`` (``memory``/``storage`` as Harbor reads them:
  ``"2G"``, ``"512M"``) and ``[agent]``, each present only when the task gives it
  (``sandbox: limits_field: limits`` applies them; see :mod:`envbuilder.isolation.sandbox._limits`).

``tests``, ``verifier``, ``oracle``, ``solution`` and ``config`` belong in the spec's
``task: private:``. Multi-step tasks (``[[steps]]``) and tasks without an
``environment/Dockerfile`` are refused, naming the directory.
"""

from __future__ import annotations

import base64
import io
import json
import re
import tarfile
import tomllib
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
from pydantic import Field

from envbuilder.data._base import Row, Source, Table
from envbuilder.data._ipc import ArrowTable
from envbuilder.errors import DataError
from envbuilder.spec import SourceConfig

__all__ = ["HarborConfig", "HarborSource", "folder_tar", "oracle_script", "strip_canary"]

_CANARY = re.compile(r"^(<!--.*canary.*-->|#.*canary.*)$", re.I)
_MAX_FOLDER = 64 * 1024 * 1024


class HarborConfig(SourceConfig):
    """Harbor task directories (instruction.md, task.toml, environment/, tests/, solution/),
    a folder of them per source split."""

    type: Literal["harbor"]
    folders: dict[str, str] = Field(min_length=1)
    """Source split name → a folder whose subfolders are Harbor task directories, relative to
    the spec's folder."""


def strip_canary(text: str) -> str:
    """The instruction without its leading canary comment lines and the blank lines after them
    (as Harbor shows it)."""
    lines = text.split("\n")
    i = 0
    while i < len(lines) and _CANARY.match(lines[i].strip()):
        i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    return "\n".join(lines[i:])


def folder_tar(folder: Path) -> bytes:
    """A tar of ``folder``'s files (names relative to it, sorted; executables kept 0755)."""
    buf = io.BytesIO()
    size = 0
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
            data = path.read_bytes()
            size += len(data)
            if size > _MAX_FOLDER:
                raise DataError(f"{folder} holds more than 64 MiB", code="data_unreadable")
            info = tarfile.TarInfo(path.relative_to(folder).as_posix())
            info.size, info.mode = len(data), 0o755 if path.stat().st_mode & 0o111 else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def oracle_script(solution: bytes) -> str:
    """The bash script that runs a solution folder's ``solve.sh`` (a tar): the script itself when
    the folder holds nothing else, else one that unpacks the folder to a fresh temporary folder
    and runs it from there (in the shell's working folder, as Harbor's oracle does)."""
    with tarfile.open(fileobj=io.BytesIO(solution), mode="r:") as tar:
        names = [m.name for m in tar if m.isfile()]
        handle = tar.extractfile("solve.sh") if "solve.sh" in names else None
        solve = handle.read().decode("utf-8", "replace") if handle is not None else ""
    if names == ["solve.sh"]:
        return solve
    packed = base64.b64encode(solution).decode()
    return f'd=$(mktemp -d) && echo {packed} | base64 -d | tar -x -C "$d" && bash "$d/solve.sh"'


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{path}: not valid TOML ({exc})", code="data_unreadable") from None


def _number(table: dict[str, Any], key: str, where: str) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise DataError(
            f"{where}.{key}: expected a positive number of seconds, got {value!r}", code="data_unreadable"
        )
    return float(value)


def _size_mb(text: Any, where: str) -> int:
    """A size as Harbor's ``memory``/``storage`` give it (``"2G"``, ``"512M"``, ``"1024K"``) in MB."""
    units = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}
    raw = text.strip().upper() if isinstance(text, str) else ""
    try:
        value = float(raw[:-1]) * units[raw[-1:]] if raw else -1.0
    except (KeyError, ValueError):
        value = -1.0
    if not 0 < value < float("inf") or int(value) < 1:
        raise DataError(
            f"{where}: expected a size such as '2G' or '512M', got {text!r}",
            hint="Or give the number of MB as an integer in the `_mb` key",
            code="data_unreadable",
        )
    return int(value)


def _limits(config: dict[str, Any], config_path: Path) -> dict[str, float]:
    """The task's own limits from ``[environment]`` and ``[agent]`` (see the module docstring).

    Raises:
        DataError: a value that is no positive number (or size), or ``memory`` and ``memory_mb``
            that disagree, naming the file, the key and the value.
    """
    environment = config.get("environment") or {}
    where = f"{config_path}: [environment]"
    if not isinstance(environment, dict):
        raise DataError(f"{where}: expected a table, got {environment!r}", code="data_unreadable")
    out: dict[str, float] = {}
    cpus = environment.get("cpus")
    if cpus is not None:
        if isinstance(cpus, bool) or not isinstance(cpus, int | float) or not 0 < cpus < float("inf"):
            raise DataError(
                f"{where}.cpus: expected a positive number of CPUs, got {cpus!r}", code="data_unreadable"
            )
        out["cpus"] = cpus
    for key in ("memory", "storage"):
        given = environment.get(f"{key}_mb")
        if given is not None and (isinstance(given, bool) or not isinstance(given, int) or given < 1):
            raise DataError(
                f"{where}.{key}_mb: expected a positive whole number of MB, got {given!r}",
                code="data_unreadable",
            )
        if environment.get(key) is not None:
            size = _size_mb(environment[key], f"{where}.{key}")
            if given is not None and given != size:
                raise DataError(
                    f"{where}.{key}: {environment[key]!r} ({size} MB) disagrees with {key}_mb = {given}",
                    hint=f"Give one of `{key}` and `{key}_mb`",
                    code="data_unreadable",
                )
            given = size
        if given is not None:
            out[f"{key}_mb"] = given
    agent = config.get("agent") or {}
    timeout = _number(agent, "timeout_sec", f"{config_path}: [agent]")
    if timeout is not None:
        out["agent_timeout_sec"] = timeout
    return out


def read_task(folder: Path, base_dir: Path) -> Row:
    """One Harbor task directory as a row (see the module docstring).

    Raises:
        DataError: a part is missing or unreadable, naming the directory and the part.
    """
    config_path = folder / "task.toml"
    if not config_path.is_file():
        raise DataError(f"{folder}: no task.toml: not a Harbor task directory", code="data_unreadable")
    config = _toml(config_path)
    where = f"{config_path}: [verifier]"
    if config.get("steps"):
        raise DataError(
            f"{config_path}: a multi-step task ([[steps]]) cannot be read",
            hint="Only single-step Harbor tasks are read",
            code="data_unreadable",
        )
    for part in ("instruction.md", "environment/Dockerfile", "tests/test.sh", "solution/solve.sh"):
        if not (folder / part).is_file():
            raise DataError(
                f"{folder}: no {part}",
                hint="A Harbor task directory holds instruction.md, task.toml, environment/Dockerfile, "
                "tests/test.sh and solution/solve.sh",
                code="data_unreadable",
            )
    verifier = config.get("verifier") or {}
    agent = config.get("agent") or {}
    env = verifier.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise DataError(f"{where}.env: expected a table of strings", code="data_unreadable")
    user = verifier.get("user")
    if user is not None and not (user == "root" or (isinstance(user, int) and user >= 0)):
        raise DataError(
            f"{where}.user: {user!r} is not a uid",
            hint="Give a number (or root): users are not looked up by name",
            code="data_unreadable",
        )
    task = config.get("task") or {}
    name = task.get("name") if isinstance(task.get("name"), str) else folder.name
    environment = (folder / "environment").resolve()
    try:
        context = environment.relative_to(base_dir.resolve()).as_posix()
    except ValueError:
        context = str(environment)
    solution = folder_tar(folder / "solution")
    return {
        "id": name,
        "instruction": strip_canary((folder / "instruction.md").read_text(encoding="utf-8")),
        "environment": context,
        "tests": base64.b64encode(folder_tar(folder / "tests")).decode(),
        "verifier": json.dumps(
            {
                "timeout_sec": _number(verifier, "timeout_sec", where) or 600.0,
                "user": 0 if user in (None, "root") else user,
                "env": env,
            }
        ),
        "oracle": json.dumps([{"name": "bash", "arguments": {"code": oracle_script(solution)}}]),
        "solution": base64.b64encode(solution).decode(),
        "config": config_path.read_text(encoding="utf-8"),
        "agent_timeout_sec": _number(agent, "timeout_sec", f"{config_path}: [agent]"),
        "limits": json.dumps(_limits(config, config_path)),
    }


class HarborSource(Source):
    Config = HarborConfig
    config: HarborConfig

    def split_names(self) -> list[str]:
        return list(self.config.folders)

    def _folder(self, split: str) -> Path:
        folder = self.base_dir / self.config.folders[split]
        if not folder.is_dir():
            raise DataError(
                f"dataset.folders.{split}: {folder} is not a folder",
                hint="Name a folder of Harbor task directories, relative to the spec's folder",
                code="data_missing",
            )
        return folder

    def open(self, split: str) -> Table:
        folder = self._folder(split)
        tasks = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        if not tasks:
            raise DataError(
                f"dataset.folders.{split}: {folder} holds no task directories", code="data_missing"
            )
        rows = [read_task(p, self.base_dir) for p in tasks]
        return ArrowTable(pa.Table.from_pylist(rows))

    def location(self, split: str) -> tuple[str | int, ...]:
        return ("dataset", "folders", split)

    def describe(self) -> dict[str, Any]:
        return {"type": self.type_name, "folders": dict(self.config.folders)}

    def files(self) -> list[Path]:
        out: set[Path] = set()
        for split in self.config.folders:
            folder = self.base_dir / self.config.folders[split]
            if folder.is_dir():
                out.update(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
        return sorted(out)
