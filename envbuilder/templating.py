"""The one Jinja factory: sandboxed, StrictUndefined, spec-relative and shipped templates."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import operator
import string
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from envbuilder.errors import TemplateError

__all__ = ["Template", "jinja_env", "recording_files", "template_globals", "templates_dir"]


def templates_dir() -> Path:
    """The templates shipped with envbuilder (in a wheel: ``envbuilder/templates``)."""
    packaged = Path(__file__).parent / "templates"
    return packaged if packaged.is_dir() else Path(__file__).parent.parent / "templates"


#: Largest string/list a template may build with ``*`` and largest exponent of ``**``:
#: a spec is untrusted, and ``{{ 'x' * 10**12 }}`` must not take the server down.
MAX_REPEAT = 1_000_000
MAX_EXPONENT = 64


def _letter(index: int) -> str:
    """``2 | letter`` -> ``C`` (the letter of a 0-based choice index)."""
    i = int(index)
    if not 0 <= i < len(string.ascii_uppercase):
        raise ValueError(f"letter: index {index!r} is outside 0-25")
    return string.ascii_uppercase[i]


def _lettered(choices: Iterable[Any], sep: str = "\n", fmt: str = "{letter}. {choice}") -> str:
    """``['x', 'y'] | lettered`` -> ``A. x\nB. y``."""
    return sep.join(fmt.format(letter=_letter(i), choice=c) for i, c in enumerate(choices))


def _numbered(items: Iterable[Any], sep: str = "\n", start: int = 1) -> str:
    """``['x', 'y'] | numbered`` -> ``1. x\n2. y``."""
    return sep.join(f"{i}. {item}" for i, item in enumerate(items, start))


def _json(value: Any, indent: int | None = None) -> str:
    """JSON text of ``value`` (unlike Jinja's ``tojson``, not HTML-escaped: prompts are not HTML)."""
    return json.dumps(value, ensure_ascii=False, indent=indent, default=str)


def _after(text: str, sep: str) -> str:
    """``'work #### 42' | after('####')`` -> ``42``: the text after the last ``sep``, stripped."""
    return str(text).rsplit(sep, 1)[-1].strip()


class _Sandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox, with ``*`` and ``**`` bounded."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        if operator_ == "**":
            too_big = isinstance(right, int | float) and abs(right) > MAX_EXPONENT
            if isinstance(left, int) and isinstance(right, int) and left.bit_length() * right > 4096:
                too_big = True  # (10**64)**64 chains: bound the result, not just the exponent
            if too_big:
                raise SecurityError("a power that large is not allowed")
            return operator.pow(left, right)
        for seq, count in ((left, right), (right, left)):
            sized = isinstance(seq, str | list | tuple) and isinstance(count, int)
            if sized and len(seq) * count > MAX_REPEAT:
                raise SecurityError(f"repetition would build more than {MAX_REPEAT:,} items")
        return operator.mul(left, right)


@functools.cache
def jinja_env(base_dir: Path | None = None) -> jinja2.Environment:
    """The sandboxed environment that loads templates from ``base_dir`` then ``templates/``."""
    search = [str(base_dir)] if base_dir is not None else []
    search.append(str(templates_dir()))
    env = _Sandbox(
        loader=jinja2.FileSystemLoader(search),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["letter"] = _letter
    env.filters["lettered"] = _lettered
    env.filters["numbered"] = _numbered
    env.filters["json"] = _json
    env.filters["after"] = _after
    env.globals["letters"] = string.ascii_uppercase
    return env


_recording: contextvars.ContextVar[dict[str, Path] | None] = contextvars.ContextVar(
    "envbuilder_template_files", default=None
)


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
        env = jinja_env(base_dir)
        self.name = name
        try:
            if from_file:
                self.source = env.loader.get_source(env, source)[0]  # type: ignore[union-attr]
                self._template = env.get_template(source)
            else:
                self.source = source
                self._template = env.from_string(source)
            ast = env.parse(self.source)
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

    def render(self, context: Mapping[str, Any]) -> str:
        """Render over ``context``; any failure is a :class:`TemplateError`."""
        try:
            return self._template.render(context)
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
        except Exception as exc:
            raise TemplateError(f"{self.name}: {type(exc).__name__}: {exc}", code="template_error") from None


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
