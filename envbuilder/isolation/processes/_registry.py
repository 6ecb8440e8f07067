"""The functions the server may run in a worker process, by name.

A call names a registered function (``module:qualname``); the worker imports the module (which
registers it) and looks the name up here. Nothing callable travels: a worker never unpickles a
function, and the server never runs in a worker what was not registered with
:func:`worker_function`. The registration also holds what the reply must be: the function's
return annotation, checked strictly by ``_reply.parse_reply``, and its size bound.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from envbuilder.isolation.processes._reply import MAX_REPLY_BYTES

__all__ = ["WorkerFunction", "lookup", "registered", "worker_function"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class WorkerFunction:
    """A function a worker process may run, and what its reply must be."""

    name: str
    """``module:qualname``: what a call sends."""
    fn: Callable[..., Any] = field(compare=False)
    reply_limit: int = MAX_REPLY_BYTES
    """Bytes its reply may take (a longer one is unreadable: the call fails)."""

    @property
    def module(self) -> str:
        return self.name.partition(":")[0]

    @functools.cached_property
    def schema(self) -> Any:
        """The function's return type, which its reply's value must match (looked up on first use)."""
        return typing.get_type_hints(self.fn)["return"]


_functions: dict[str, WorkerFunction] = {}


@overload
def worker_function(fn: F, /) -> F: ...
@overload
def worker_function(*, reply_limit: int = MAX_REPLY_BYTES) -> Callable[[F], F]: ...
def worker_function(fn: Any = None, /, *, reply_limit: int = MAX_REPLY_BYTES) -> Any:
    """Register a module-level function that worker processes may run; it needs a return
    annotation of JSON-shaped types (numbers, strings, booleans, None, lists, tuples, dicts,
    pydantic models), which is what its reply is checked against. Returns it unchanged."""

    def register(f: F) -> F:
        name = f"{f.__module__}:{f.__qualname__}"
        if "<" in f.__qualname__:
            raise TypeError(f"{name}: a worker function must be defined at module level")
        if "return" not in getattr(f, "__annotations__", {}):
            raise TypeError(f"{name}: a worker function needs a return annotation (its reply's schema)")
        _functions[name] = WorkerFunction(name, f, reply_limit)
        return f

    return register(fn) if fn is not None else register


def registered(fn: Callable[..., Any]) -> WorkerFunction:
    """The registration of ``fn``.

    Raises:
        TypeError: ``fn`` was not registered with :func:`worker_function`.
    """
    entry = _functions.get(f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', '?')}")
    if entry is None or entry.fn is not fn:
        raise TypeError(f"{fn!r} is not a worker function: decorate it with @worker_function")
    return entry


def lookup(name: str) -> WorkerFunction | None:
    """The function registered as ``name`` in this process, if any."""
    return _functions.get(name)
