"""The guard of a worker child that evaluates an answer: once armed, code the answer supplies may
compute, but may not reach the interpreter, the system or the process.

Some checkers run the answer: reasoning-gym's ``countdown`` and ``puzzle24`` give it to SymPy's
``parse_expr`` (which is ``eval``), ``spiral_matrix`` and ``n_queens`` to ``eval`` itself. The
child that does so is fresh, confined and thrown away after the one answer, but inside it the
answer could still decide what that child replies: ``exec("…")`` could write a reply of its own
making on the child's socket (1.0 for a wrong answer, any reason text). So before the checker
sees the answer the function calls :func:`guarded`, which arms a :pep:`578` audit hook for the
rest of the child's life (a hook cannot be removed) that refuses, by raising:

- dynamic code (compiled from a string, ``co_filename`` like ``<string>``) that names anything
  starting with ``_``, names a builtin that reaches code or the interpreter (:data:`NAMES`),
  reads or writes an attribute, or imports anything but ``sympy`` (``parse_expr``'s own
  ``from sympy import *``). Arithmetic, sympy calls and literals, which is all an answer is,
  pass; ``exec``, ``__import__``, ``x.__class__`` and ``getattr`` do not;
- imports of modules that reach the system (``ctypes``, ``subprocess``, ``socket``, …);
- the side effects such code would be after: processes and signals, writing, removing or
  renaming files, sockets, raw memory, and reaching other frames or objects (``gc``,
  ``sys.settrace``, ``sys._current_frames``), new functions or code objects, ``marshal`` and
  ``pickle``.

The first refusal is recorded (:func:`refusal`) and the child replies ``{"refused": kind}``
whatever the checker did with the exception, so the answer is ungradeable, never scored. This
guard is not a sandbox for code already running (:pep:`578` says as much): it keeps the answer
from becoming running code at all. The process confinement (bubblewrap, rlimits, a fresh child
per answer) is what holds if it ever fails.
"""

from __future__ import annotations

import dis
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["NAMES", "Refused", "guarded", "refusal"]

T = TypeVar("T")

NAMES = frozenset(
    {
        "exec", "eval", "compile", "open", "input", "breakpoint", "help", "exit", "quit",
        "getattr", "setattr", "delattr", "globals", "locals", "vars", "dir",
        "type", "object", "super", "memoryview", "classmethod", "staticmethod", "property",
        # SymPy's own ways to code or to the system: lambdify execs generated source, preview
        # runs LaTeX, init_session and init_printing exec and import.
        "lambdify", "preview", "init_session", "init_printing",
    }
)  # fmt: skip
"""Names dynamic code may not use (besides every name that starts with ``_``)."""

_OPS = frozenset(
    {
        "LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR", "DELETE_ATTR", "LOAD_SUPER_ATTR",
        "STORE_GLOBAL", "DELETE_GLOBAL", "IMPORT_FROM", "SETUP_WITH", "BEFORE_WITH",
    }
)  # fmt: skip
_IMPORTS = frozenset({"sympy"})
_MODULES = frozenset(
    {
        "ctypes", "_ctypes", "cffi", "_cffi_backend", "subprocess", "_posixsubprocess", "socket",
        "_socket", "ssl", "_ssl", "mmap", "pty", "multiprocessing", "_multiprocessing", "fcntl",
        "resource", "_posixshmem", "pickle", "_pickle", "marshal", "code", "codeop", "pdb",
        "urllib", "http", "ftplib", "smtplib", "webbrowser", "sqlite3", "_sqlite3",
    }
)  # fmt: skip
_PROCESS = frozenset(
    {
        "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty", "os.kill",
        "os.killpg", "os.startfile", "os.add_dll_directory",
    }
)  # fmt: skip
_ALLOWED = frozenset(
    {
        # what importing a module (SymPy loads submodules as it needs them) and logging raise
        "os.listdir", "os.scandir", "sys._getframe", "sys._getframemodulename", "sys.excepthook",
        "sys.unraisablehook",
    }
)  # fmt: skip
_KINDS = {
    "socket": "network", "urllib": "network", "http": "network", "ftplib": "network",
    "smtplib": "network", "webbrowser": "network", "ctypes": "memory", "mmap": "memory",
    "gc": "introspection", "sys": "introspection", "builtins": "introspection", "pdb": "introspection",
    "marshal": "code", "pickle": "code", "code": "code", "function": "code", "cpython": "code",
    "os": "file", "shutil": "file", "tempfile": "file", "glob": "file", "sqlite3": "file", "fcntl": "file",
    "subprocess": "process", "signal": "process", "resource": "process",
}  # fmt: skip
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class Refused(RuntimeError):
    """Raised inside the checker when the guard refuses what the answer tried."""


_state: dict[str, Any] = {"armed": False, "refusal": None, "child": False}


def guarded(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` with the guard armed (for good: the child ends after this answer). Only in a
    worker child; the server never arms it in itself.

    Raises:
        RuntimeError: called outside a worker child.
    """
    if not _state["child"]:
        raise RuntimeError("the guard is armed only in a worker process's child")
    if not _state["armed"]:
        sys.addaudithook(_hook)
        _state["armed"] = True
    return fn(*args)


def refusal() -> str | None:
    """What the guard refused first (one of ``_reply.REFUSALS``), or None."""
    refused: str | None = _state["refusal"]
    return refused


def in_child() -> None:
    """Mark this process as a worker child (where :func:`guarded` may arm the guard)."""
    _state["child"] = True


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _state["armed"]:
        return
    kind = verdict(event, args)
    if kind is not None:
        if _state["refusal"] is None:
            _state["refusal"] = kind
        raise Refused(f"refused: {event}")


def verdict(event: str, args: tuple[Any, ...]) -> str | None:
    """What kind of thing ``event`` is, when the armed guard refuses it; None when it allows it."""
    if event == "exec":
        code = args[0] if args else None
        return "code" if isinstance(code, types.CodeType) and not _plain(code) else None
    if event == "import":
        top = str(args[0]).partition(".")[0] if args else ""
        return "import" if top in _MODULES else None
    if event == "open":
        mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, 0)
        writes = any(c in str(mode or "") for c in "wax+") or bool(int(flags or 0) & _WRITE_FLAGS)
        return "file" if writes else None
    if event in _ALLOWED:
        return None
    if event in _PROCESS:
        return "process"
    return _KINDS.get(event.partition(".")[0])


def _plain(code: types.CodeType) -> bool:
    """Whether ``code`` may run: a module's own code (from a file), or dynamic code that only
    computes (see the module docstring)."""
    if not code.co_filename.startswith("<"):
        return True  # a module being imported from the read-only installation
    for part in _codes(code):
        if any(name.startswith("_") or name in NAMES for name in part.co_names):
            return False
        for ins in dis.get_instructions(part):
            if ins.opname in _OPS or (ins.opname == "IMPORT_NAME" and ins.argval not in _IMPORTS):
                return False
    return True


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)
