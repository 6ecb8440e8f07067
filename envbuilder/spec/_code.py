"""Code a spec runs: which of its parts run code of the spec's own, and whether this spec may.

A ``function`` tool imports a Python module named by the spec, an ``mcp`` tool starts a command
(or hands the agent the tools of a server the spec names); a plugin type whose config names code
says so through :meth:`ConfigModel.runs_code`. Installed code (plugins, generators, an
importable module the user installed) is the user's own choice; a spec is not, unless it is.

**The user's own folders.** A spec may run its code when every spec file it is made of (the
file and the bases it ``extends:``) lies in one of the user's own folders: any local folder
except envbuilder's cache folder (``$ENVBUILDER_CACHE_DIR``, where pulled and extracted packs
live) and an extracted pack (a folder at or under one that holds ``envbuilder.lock.json``).
Every pack is therefore untrusted, wherever it came from (a local ``.zip``, a URL, a catalog),
unless the operator says otherwise: ``--trust-code`` (``trust_code=True``), or a pack whose
signed lock verifies with a ``--trusted-key``. ``trust_code=False`` refuses code even from the
user's own folders.

The check runs on the validated spec, before any part is built: nothing is imported and no
command starts until it passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from envbuilder import paths
from envbuilder.errors import Loc, Problem
from envbuilder.plugins import ConfigModel

if TYPE_CHECKING:
    from envbuilder.spec._load import LoadedSpec

__all__ = ["TRUST_HINT", "code_parts", "code_problems", "own_folder"]

TRUST_HINT = (
    "Pass --trust-code (trust_code=True in Python) if you trust its source and want its code to "
    "run; a pack whose signature verifies with a key you pass as --trusted-key is trusted too"
)
_KINDS = {"tools": "tool", "grader": "grader", "dataset": "dataset"}


def code_parts(spec: Any) -> list[tuple[Loc, str, str]]:
    """Every part of the validated ``spec`` that runs code of its own: its key path (down to the
    key naming the code), its ``type``, and what it runs. Blocks that failed validation (the
    placeholders of a partial load) are skipped: they are never built."""
    found: list[tuple[Loc, str, str]] = []

    def walk(value: Any, loc: Loc) -> None:
        if isinstance(value, ConfigModel):
            part = value.runs_code()
            if part is not None:
                key, what = part
                found.append(((*loc, *key), str(getattr(value, "type", "")), what))
            for name in type(value).model_fields:
                walk(getattr(value, name), (*loc, name))
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                walk(item, (*loc, i))
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*loc, key))

    walk(spec, ())
    return found


def own_folder(folder: Path) -> bool:
    """Whether ``folder`` is one of the user's own (see the module docstring): not inside
    envbuilder's cache folder, and not inside an extracted pack."""
    return not _in_cache(folder) and not _in_pack(folder)


def _in_cache(folder: Path) -> bool:
    return folder.resolve().is_relative_to(paths.cache_dir().resolve())


def _in_pack(folder: Path) -> bool:
    resolved = folder.resolve()
    return any((parent / paths.PACK_LOCK_NAME).is_file() for parent in (resolved, *resolved.parents))


def _untrusted_origin(loaded: LoadedSpec, trust_code: bool | None) -> str | None:
    """Why ``loaded`` may not run code (None: it may)."""
    if trust_code:
        return None
    for folder in [loaded.base_dir, *(base.parent for base in loaded.positions.bases)]:
        if _in_pack(folder):
            return "comes from a pack, not from your own folders"
        if _in_cache(folder):
            return f"lies in envbuilder's cache folder ({paths.cache_dir()}), not in your own folders"
    return None if trust_code is None else "was loaded with trust_code=False"


def code_problems(loaded: LoadedSpec, trust_code: bool | None = None) -> list[Problem]:
    """The parts of ``loaded`` that run code it may not run: one located problem per piece of
    code (the first part that runs it; the others using the same code are counted in it).

    Args:
        trust_code: True: run it whatever its origin (``--trust-code``); False: never; None:
            only from the user's own folders (:func:`own_folder`).
    """
    parts = code_parts(loaded.spec)
    if not parts:
        return []
    origin = _untrusted_origin(loaded, trust_code)
    if origin is None:
        return []
    by_code: dict[tuple[str, str], list[Loc]] = {}
    for loc, kind, what in parts:
        by_code.setdefault((kind, what), []).append(loc)
    problems = []
    for (kind, what), locs in by_code.items():
        noun = _KINDS.get(str(locs[0][0]), "part") if locs[0] else "part"
        more = f" (so do {len(locs) - 1} more {noun}s)" if len(locs) > 1 else ""
        message = (
            f"this spec {origin}, and its `{kind}` {noun} {what}{more}: "
            "refusing to run code from it before you say so"
        )
        problems.append(loaded.locate(locs[0], message, code="code_not_trusted", hint=TRUST_HINT))
    return problems
