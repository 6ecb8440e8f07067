"""The template API: :class:`Template` (compile with located errors, render within the budgets),
the render limits a spec sets, and the record of the template files a spec uses."""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
import jinja2.nodes
from jinja2.sandbox import SecurityError

from envbuilder import deadlines
from envbuilder.errors import TemplateError
from envbuilder.templating import _isolated
from envbuilder.templating._sandbox import (
    MAX_RENDER_CHARS,
    RENDER_SECONDS,
    UNBOUNDED_NODES,
    TooBig,
    inline,
    jinja_env,
    render_budget,
    templates_dir,
)

_recording: contextvars.ContextVar[dict[str, Path] | None] = contextvars.ContextVar(
    "envbuilder_template_files", default=None
)
_limits: contextvars.ContextVar[tuple[float, int]] = contextvars.ContextVar(
    "envbuilder_render_limits", default=(RENDER_SECONDS, MAX_RENDER_CHARS)
)


@contextlib.contextmanager
def render_limits(seconds: float | None, chars: int | None) -> Iterator[None]:
    """Templates compiled inside the block (by any part: prompt, turns, graders, tools) render
    within ``seconds`` and ``chars`` instead of :data:`RENDER_SECONDS` and
    :data:`MAX_RENDER_CHARS` (a spec's ``limits:``; None keeps the default)."""
    token = _limits.set((seconds or RENDER_SECONDS, chars or MAX_RENDER_CHARS))
    try:
        yield
    finally:
        _limits.reset(token)


_folders: contextvars.ContextVar[tuple[Path, ...]] = contextvars.ContextVar(
    "envbuilder_template_folders", default=()
)


@contextlib.contextmanager
def template_folders(folders: Iterable[Path]) -> Iterator[None]:
    """Template files compiled inside the block are also looked for in ``folders``, after the
    spec's own folder (the folders of the bases a spec ``extends:``)."""
    token = _folders.set(tuple(dict.fromkeys(folders)))
    try:
        yield
    finally:
        _folders.reset(token)


@contextlib.contextmanager
def recording_files() -> Iterator[dict[str, Path]]:
    """Collect the template files compiled inside the block (by any part: prompt, turns, graders
    and plugins), as ``{name as written: resolved path}``, including the files they
    ``{% include %}``, ``{% import %}`` or ``{% extends %}`` by a constant name."""
    files: dict[str, Path] = {}
    token = _recording.set(files)
    try:
        yield files
    finally:
        _recording.reset(token)


def _record(env: jinja2.Environment, names: Iterable[str]) -> None:
    files = _recording.get()
    if files is None:
        return
    for name in names:
        if name in files:
            continue
        try:
            source, filename, _ = env.loader.get_source(env, name)  # type: ignore[union-attr]
            referenced = jinja2.meta.find_referenced_templates(env.parse(source))
        except (jinja2.TemplateNotFound, jinja2.TemplateSyntaxError):
            continue  # reported when the template compiles or renders
        if filename is not None:
            files[name] = Path(filename).resolve()
        _record(env, [n for n in referenced if n is not None])


@functools.cache
def template_globals() -> frozenset[str]:
    """The names a template may use besides the task's fields (Jinja's globals and ours)."""
    return frozenset(jinja_env().globals)


class Template:
    """A compiled template with the variables it reads; renders with clear errors."""

    def __init__(
        self,
        source: str,
        *,
        name: str = "<template>",
        base_dir: Path | None = None,
        from_file: bool = False,
    ):
        folders = _folders.get()
        env = jinja_env(base_dir, *(f for f in folders if f != base_dir))
        self.name = name
        self.seconds, self.max_chars = _limits.get()
        """This template's render budget: the defaults, or its spec's ``limits:``."""
        self.recipe: _isolated.Recipe = (
            source,
            from_file,
            name,
            None if base_dir is None else str(base_dir),
            tuple(str(f) for f in folders),
            self.seconds,
            self.max_chars,
        )
        """What a render process needs to compile this template again (``_isolated``)."""
        try:
            if from_file:
                self.source = env.loader.get_source(env, source)[0]  # type: ignore[union-attr]
                self._template = env.get_template(source)
            else:
                self.source = source
                self._template = env.from_string(source)
            ast = env.parse(self.source)
        except TemplateError as exc:
            raise TemplateError(f"{name}: {exc.message}", hint=exc.hint, code=exc.code) from None
        except jinja2.TemplateNotFound:
            raise TemplateError(
                f"{name}: template file {source!r} not found",
                hint=f"Looked relative to the spec and in {templates_dir()}",
                code="template_not_found",
            ) from None
        except jinja2.TemplateSyntaxError as exc:
            line = (exc.source or source).splitlines()
            near = line[exc.lineno - 1].strip() if 0 < exc.lineno <= len(line) else ""
            raise TemplateError(
                f"{name}: template syntax error at line {exc.lineno}: {exc.message}"
                + (f" in `{near}`" if near else ""),
                code="template_syntax",
            ) from None
        private = _private_access(ast)
        if private:
            private.sort(key=self.source.find)
            raise TemplateError(
                f"{name}: reads the private attribute{'s' if len(private) > 1 else ''} "
                f"{', '.join(map(repr, private))}, which the template sandbox refuses",
                hint="Templates may only read the task's fields",
                code="template_unsafe",
            )
        _record(env, [source] if from_file else [n for n in jinja2.meta.find_referenced_templates(ast) if n])
        self.variables: frozenset[str] = (
            frozenset(jinja2.meta.find_undeclared_variables(ast)) - template_globals()
        )
        self.bounded: bool = next(ast.find_all(UNBOUNDED_NODES), None) is None and inline(ast)
        """It only shows fields (``_sandbox.inline``): a render is one pass over them, so it may
        run on the event loop, untimed. Every other template renders in a render process under
        the deadline (``_isolated``), and the server waits for it off the loop."""

    def render(self, context: Mapping[str, Any]) -> str:
        """Render over ``context`` within the budgets; any failure is a :class:`TemplateError`."""
        if not self.bounded and not _isolated.in_worker:
            texts = _isolated.render_elsewhere(self, [context])
            if texts is not None:
                return texts[0]
        return self._render_here(context)

    def render_each(self, contexts: Iterable[Mapping[str, Any]]) -> list[str]:
        """:meth:`render` over each of ``contexts``, a batch at a time for a template that renders
        in a render process (so many small renders do not cost a round trip each)."""
        if self.bounded or _isolated.in_worker:
            return [self._render_here(c) for c in contexts]
        items = list(contexts)
        out: list[str] = []
        for start in range(0, len(items), _isolated.BATCH):
            batch = items[start : start + _isolated.BATCH]
            texts = _isolated.render_elsewhere(self, batch)
            out.extend(texts if texts is not None else [self._render_here(c) for c in batch])
        return out

    def _render_here(self, context: Mapping[str, Any]) -> str:
        outer = getattr(render_budget, "left", None)
        if outer is None:
            render_budget.left = render_budget.limit = self.max_chars
        try:
            if self.bounded:
                return self._template.render(context)
            try:
                with deadlines.deadline(self.seconds):
                    return self._template.render(context)
            except deadlines.Overrun:
                raise TemplateError(
                    f"{self.name}: rendering took longer than {self.seconds:g} s and was stopped",
                    hint="A loop in the template runs too long; loop over the task's fields only "
                    "(or raise `limits.render_seconds` in the spec)",
                    code="template_budget",
                ) from None
        except TemplateError:
            raise
        except TooBig as exc:
            raise TemplateError(
                f"{self.name}: stopped by the render budget: {str(exc).rstrip('.')}",
                hint="Templates should show the task's fields, not build large text "
                "(or raise `limits.render_chars` in the spec)",
                code="template_budget",
            ) from None
        except SecurityError as exc:
            raise TemplateError(
                f"{self.name}: refused by the template sandbox: {str(exc).rstrip('.')}",
                hint="Templates may only read the task's fields",
                code="template_unsafe",
            ) from None
        except jinja2.UndefinedError as exc:
            raise TemplateError(
                f"{self.name}: {exc.message}",
                hint=f"Available fields: {', '.join(sorted(context))}",
                code="template_undefined",
            ) from None
        except jinja2.TemplateError as exc:
            raise TemplateError(f"{self.name}: {exc}", code="template_error") from None
        except MemoryError:
            message = f"{self.name}: the render ran out of memory"
            raise TemplateError(message, code="template_budget") from None
        except Exception as exc:
            raise TemplateError(f"{self.name}: {type(exc).__name__}: {exc}", code="template_error") from None
        finally:
            if outer is None:
                render_budget.left = None


def template_or_file(
    inline: str | None,
    file: str | None,
    *,
    key: str,
    base_dir: Path | None,
    default_file: str | None = None,
) -> Template | None:
    """The template a spec gives inline under ``key`` or as a file under ``key_file``
    (``default_file`` when it gives neither; None without one). The spec's model makes sure at
    most one is given."""
    if inline is not None:
        return Template(inline, name=key, base_dir=base_dir)
    file = file if file is not None else default_file
    if file is None:
        return None
    return Template(file, name=f"{key}_file", base_dir=base_dir, from_file=True)


def _private_access(ast: jinja2.nodes.Template) -> list[str]:
    """The ``_private`` attributes the template names literally (``x.__class__``,
    ``x['__class__']``, ``x|attr('__class__')``), found before anything renders. Names built
    at render time are still refused by the sandbox then."""
    found: list[str] = []
    for node in ast.find_all((jinja2.nodes.Getattr, jinja2.nodes.Getitem, jinja2.nodes.Filter)):
        name: object = None
        if isinstance(node, jinja2.nodes.Getattr):
            name = node.attr
        elif isinstance(node, jinja2.nodes.Getitem):
            name = node.arg.value if isinstance(node.arg, jinja2.nodes.Const) else None
        elif isinstance(node, jinja2.nodes.Filter):
            first = node.args[0] if node.name == "attr" and node.args else None
            name = first.value if isinstance(first, jinja2.nodes.Const) else None
        if isinstance(name, str) and name.startswith("_") and name not in found:
            found.append(name)
    return found


def _compile_recipe(recipe: _isolated.Recipe) -> Template:
    """A template compiled again from its recipe, in a render worker (``_isolated``)."""
    source, from_file, name, base_dir, folders, seconds, chars = recipe
    with template_folders(Path(f) for f in folders), render_limits(seconds, chars):
        return Template(source, name=name, base_dir=Path(base_dir) if base_dir else None, from_file=from_file)


_isolated.compile_recipe = _compile_recipe
