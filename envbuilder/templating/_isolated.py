"""Templates that do more than show fields render in worker processes, killed at their budget.

A template's loop is stopped inside its own thread by the render deadline, but one filter over
a long row (``wordwrap`` is one regular-expression split, ``q ~ q`` one copy) is a single C call
that holds the interpreter lock for seconds: every other request waits, ``/health`` included.
So :meth:`~envbuilder.templating.Template.render` sends such a template (its recipe: source,
folders and budgets, never a compiled object) and the fields it reads to :func:`render_pool`
(:mod:`envbuilder.isolation.processes`): the recipe is compiled once in each zygote (it is the spec's),
and each render runs in a fresh child of it, under the same deadline and character budget as in
the server, answering with the texts or the error as data; past the budget plus :data:`GRACE`
the child is killed. Templates that only show fields (``Template.bounded``) never leave the
server: they are one pass over the row.

Render processes run the spec's own templates (Jinja's sandbox) over task fields, which a
client's task or an answer (a feedback template) may fill: data, never code. They run
unconfined, with every worker's limits, and, like every worker, never serve two renders.

Size: ``$ENVBUILDER_RENDER_PROCESSES``, default the cores this process may use (at least 2).
"""

from __future__ import annotations

import atexit
import json
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from envbuilder.errors import TemplateError
from envbuilder.isolation.processes import (
    CheckTimeout,
    ProcessPool,
    WorkerError,
    WorkerFailed,
    worker_function,
)
from envbuilder.isolation.sandbox._slots import count_setting

__all__ = [
    "BATCH",
    "GRACE",
    "PROCESSES_ENV",
    "Failed",
    "Recipe",
    "Rendered",
    "render_elsewhere",
    "render_pool",
]

PROCESSES_ENV = "ENVBUILDER_RENDER_PROCESSES"
GRACE = 1.0
"""Seconds past a template's render budget before its process is killed: a loop is stopped by the
process's own deadline; only a C call that ignores it is killed. It also covers the fresh
process's start, which a loaded machine can stretch past half a second."""
BATCH = 64
"""Contexts sent to a worker in one call by :meth:`~envbuilder.templating.Template.render_each`
(a search tool's passages): one round trip for many small renders, still under one deadline."""
_CACHED = 256
"""Compiled templates a worker keeps (a spec has a handful; client-sent ones come and go)."""

Recipe = tuple[str, bool, str, str | None, tuple[str, ...], float, int]
"""What a worker needs to compile a template: source or file name, whether it is a file, its
name, the spec's folder, the extra template folders, seconds and characters of budget."""

in_worker = False
"""True inside a render worker, where templates render in the worker's own thread."""


class Template(Protocol):
    """What this module needs of a compiled template (``_template.Template``)."""

    name: str
    seconds: float
    max_chars: int

    @property
    def recipe(self) -> Recipe: ...

    def render(self, context: Mapping[str, Any]) -> str: ...


compile_recipe: Callable[[Recipe], Template] | None = None
"""Compiles a recipe in a worker: set by ``_template`` when it is imported (importing this
module imports its package first, which imports ``_template``), so that this module needs no
import of the template class that calls it."""

_pool: ProcessPool | None = None
_pool_lock = threading.Lock()


def render_pool() -> ProcessPool:
    """The process-wide pool of render workers."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ProcessPool(count_setting(PROCESSES_ENV, at_least=2))
            atexit.register(_pool.close)
        return _pool


def render_elsewhere(template: Template, contexts: Sequence[Mapping[str, Any]]) -> list[str] | None:
    """``template`` rendered over each of ``contexts`` (at most :data:`BATCH`) by a render
    worker, within one render's budget in all; None when a context cannot be sent to another
    process (the caller renders it here, under the deadline).

    Raises:
        TemplateError: a render failed, ran past the budget, or its worker died.
    """
    recipe = template.recipe
    try:
        reply = render_pool().call(
            _render,
            recipe,
            [dict(c) for c in contexts],
            timeout=template.seconds + GRACE,
            prepare=[(_prepare, list(recipe))],
            # Each text is within the character budget; JSON takes at most 6 bytes a character.
            reply_limit=len(contexts) * template.max_chars * 6 + 4096,
        )
    except CheckTimeout:
        raise TemplateError(
            f"{template.name}: rendering took longer than {template.seconds:g} s and was stopped",
            hint="One filter over a long field runs too long; show the task's fields "
            "(or raise `limits.render_seconds` in the spec)",
            code="template_budget",
        ) from None
    except WorkerError as exc:
        raise TemplateError(
            f"{template.name}: the render failed ({exc.kind})", code="template_error"
        ) from None
    except WorkerFailed as exc:
        message = (
            f"{template.name}: the render stopped: {str(exc).replace('worker process', 'render process')}"
        )
        raise TemplateError(message, code="template_budget") from None
    except (pickle.PicklingError, TypeError, AttributeError):
        return None  # a field the pickle cannot carry (an open handle, a lambda)
    if isinstance(reply, Rendered):
        if len(reply.texts) != len(contexts):
            raise TemplateError(
                f"{template.name}: the render process answered out of turn", code="template_error"
            )
        return reply.texts
    raise TemplateError(reply.message, hint=reply.hint, code=reply.code)


# -- the worker's side ----------------------------------------------------------------------------


class Rendered(BaseModel):
    """A render process's texts, one per context."""

    model_config = ConfigDict(extra="forbid", strict=True)
    texts: list[str]


class Failed(BaseModel):
    """A render process's first :class:`TemplateError`, as its parts."""

    model_config = ConfigDict(extra="forbid", strict=True)
    message: str
    hint: str | None
    code: str


_compiled: OrderedDict[str, Template] = OrderedDict()


@worker_function
def _render(recipe: Recipe, contexts: list[dict[str, Any]]) -> Rendered | Failed:
    """Run in a render process: the template of ``recipe`` (compiled by the zygote, or here)
    over each context; the texts or the first error's parts."""
    global in_worker
    in_worker = True
    try:
        template = _template(recipe)
        return Rendered(texts=[template.render(context) for context in contexts])
    except TemplateError as exc:
        return Failed(message=exc.message, hint=exc.hint, code=exc.code)


@worker_function
def _prepare(recipe: list[Any]) -> bool:
    """Run in a zygote: compile the spec's template once for every child to come (a compile
    error is the child's to report, with the render)."""
    global in_worker
    in_worker = True
    _template(tuple(recipe))
    return True


def _template(recipe: Recipe) -> Template:
    key = json.dumps(list(recipe))
    template = _compiled.get(key)
    if template is None:
        template = _compiled[key] = _compile(recipe)
        if len(_compiled) > _CACHED:
            _compiled.popitem(last=False)
    else:
        _compiled.move_to_end(key)
    return template


def _compile(recipe: Recipe) -> Template:
    if compile_recipe is None:
        raise RuntimeError("envbuilder.templating._template was not imported")
    return compile_recipe(recipe)
