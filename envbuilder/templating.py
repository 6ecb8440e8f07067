"""The one Jinja factory: sandboxed, StrictUndefined, spec-relative and shipped templates."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import operator
import re
import string
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jinja2
import jinja2.compiler
import jinja2.filters
import jinja2.meta
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from envbuilder import budget
from envbuilder.errors import TemplateError
from envbuilder.paths import check_inside

__all__ = ["Template", "jinja_env", "recording_files", "template_globals", "templates_dir"]


def templates_dir() -> Path:
    """The templates shipped with envbuilder (in a wheel: ``envbuilder/templates``)."""
    packaged = Path(__file__).parent / "templates"
    return packaged if packaged.is_dir() else Path(__file__).parent.parent / "templates"


#: Largest string/list a template may build with ``*`` and largest exponent of ``**``:
#: a spec is untrusted, and ``{{ 'x' * 10**12 }}`` must not take the server down.
MAX_REPEAT = 1_000_000
MAX_EXPONENT = 64
#: Largest field width or padding (``'{:>99999999}'.format(1)``, ``center(10**8)``).
MAX_WIDTH = 10_000
#: Characters one render may build in all (output, joins, repetitions, formatting): a template
#: doubling a string in a loop stops here, long before memory runs out.
MAX_RENDER_CHARS = 16_000_000
#: Seconds one render may take (a template that only shows fields is not timed: see ``inline``).
RENDER_SECONDS = 2.0

#: What a template may hold and still render on the event loop, untimed: showing fields and
#: constants, tests and conditions, and filters that are one linear C pass over a field. Anything
#: else (loops, macros, includes, ``*``, ``~``, ``wordwrap``, …) can take seconds on a long row,
#: even within the size caps, so it renders under the deadline, off the loop.
_INLINE_NODES = (
    jinja2.nodes.Template,
    jinja2.nodes.Output,
    jinja2.nodes.TemplateData,
    jinja2.nodes.Name,
    jinja2.nodes.Getattr,
    jinja2.nodes.Getitem,
    jinja2.nodes.Const,
    jinja2.nodes.If,
    jinja2.nodes.CondExpr,
    jinja2.nodes.Compare,
    jinja2.nodes.Operand,
    jinja2.nodes.Not,
    jinja2.nodes.And,
    jinja2.nodes.Or,
    jinja2.nodes.Test,
    jinja2.nodes.Filter,
)
_INLINE_FILTERS = frozenset(
    {"trim", "lower", "upper", "string", "default", "d", "e", "escape", "length", "count", "int", "float"}
)
_INLINE_TESTS = frozenset({"defined", "undefined", "none", "string", "number", "mapping", "sequence"})


def _inline(ast: jinja2.nodes.Template) -> bool:
    """Whether every node of ``ast`` is one :data:`_INLINE_NODES` allows."""
    for node in ast.find_all(jinja2.nodes.Node):
        if not isinstance(node, _INLINE_NODES):
            return False
        if isinstance(node, jinja2.nodes.Filter) and node.name not in _INLINE_FILTERS:
            return False
        if isinstance(node, jinja2.nodes.Test) and node.name not in _INLINE_TESTS:
            return False
    return True


#: Nodes that can make a render run long: loops, macros (recursion), other templates.
_UNBOUNDED_NODES = (
    jinja2.nodes.For,
    jinja2.nodes.Macro,
    jinja2.nodes.CallBlock,
    jinja2.nodes.Include,
    jinja2.nodes.Import,
    jinja2.nodes.FromImport,
    jinja2.nodes.Extends,
)
_PERCENT_WIDTH = re.compile(r"%[#0 +-]*(\*|\d+)?(?:\.(\*|\d+))?")
_SPEC_NUMBERS = re.compile(r"\d+")


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


class _TooBig(SecurityError):
    """The render would build more than its budget allows."""


_budget = threading.local()
"""``left``: characters the render running in this thread may still build (unset: no budget);
``limit``: that render's whole allowance (for the message)."""


def _charge(size: int) -> None:
    left: int | None = getattr(_budget, "left", None)
    if left is not None:
        left -= size
        _budget.left = left
        if left < 0:
            limit = getattr(_budget, "limit", MAX_RENDER_CHARS)
            raise _TooBig(f"the render would build more than {limit:,} characters")


def _weight(value: Any) -> int:
    """Characters a value stands for (a list of strings: their total, not its length)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list | tuple):
        return sum(len(v) if isinstance(v, str) else 1 for v in value)
    return 1


def _check_width(width: Any) -> None:
    if isinstance(width, int) and abs(width) > MAX_WIDTH:
        raise _TooBig(f"a width of {width:,} is not allowed (at most {MAX_WIDTH:,})")


def _check_spec(spec: str) -> None:
    """Refuse format specs (``>99999999``, ``.99999999f``) wider than :data:`MAX_WIDTH`."""
    if "{" in spec:
        raise SecurityError("nested fields in a format spec are not allowed")
    for digits in _SPEC_NUMBERS.findall(spec):
        _check_width(int(digits))


def _check_percent(fmt: str) -> None:
    for width, precision in _PERCENT_WIDTH.findall(fmt):
        for part in (width, precision):
            if part == "*":
                raise SecurityError("'*' widths in % formatting are not allowed")
            if part:
                _check_width(int(part))


class _Generator(jinja2.compiler.CodeGenerator):
    """Compiles ``a ~ b`` through the sandbox so concatenation counts against the budget."""

    def visit_Concat(self, node: jinja2.nodes.Concat, frame: Any) -> None:
        self.write("environment.concat_bounded((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


def _bounded_filter(fn: Callable[..., Any], widths: tuple[int, ...]) -> Callable[..., Any]:
    """Wrap a built-in filter: its width arguments (by position after the value) are capped
    and what it returns counts against the render's budget."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for i in widths:
            if i < len(args):
                _check_width(args[i])
        for value in kwargs.values():
            _check_width(value)
        result = fn(*args, **kwargs)
        _charge(_weight(result))
        return result

    return wrapper


def _bounded_replace(eval_ctx: Any, s: Any, old: Any, new: Any, count: Any = None) -> Any:
    text, old, new = str(s), str(old), str(new)
    grows = len(new) - len(old)
    if grows > 0 and text.count(old) * grows + len(text) > MAX_REPEAT:
        raise _TooBig(f"replace would build more than {MAX_REPEAT:,} characters")
    result = jinja2.filters.do_replace(eval_ctx, s, old, new, count)
    _charge(len(result))
    return result


_bounded_replace.jinja_pass_arg = jinja2.utils._PassArg.eval_context  # type: ignore[attr-defined]


def _bounded_format(value: Any, *args: Any, **kwargs: Any) -> str:
    _check_percent(str(value))
    result = jinja2.filters.do_format(value, *args, **kwargs)
    _charge(len(result))
    return result


def _bounded_lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    _check_width(n * 1000)  # n paragraphs of up to `max` words
    _check_width(max)
    return jinja2.utils.generate_lorem_ipsum(n=n, html=html, min=min, max=max)


class _Sandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox, with everything that can grow bounded: ``*``, ``**``, ``+``,
    ``%``, ``~``, ``str.format`` widths, padding filters and string methods, and the total a
    render builds (:data:`MAX_RENDER_CHARS`)."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})
    code_generator_class = _Generator

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        if operator_ == "**":
            too_big = isinstance(right, int | float) and abs(right) > MAX_EXPONENT
            if isinstance(left, int) and isinstance(right, int) and left.bit_length() * right > 4096:
                too_big = True  # (10**64)**64 chains: bound the result, not just the exponent
            if too_big:
                raise SecurityError("a power that large is not allowed")
            return operator.pow(left, right)
        if operator_ == "+":
            result = operator.add(left, right)
            if isinstance(result, str | list | tuple):
                _charge(_weight(result))
            return result
        if operator_ == "%":
            if isinstance(left, str):
                _check_percent(left)
                result = operator.mod(left, right)
                _charge(len(result))
                return result
            return operator.mod(left, right)
        for seq, count in ((left, right), (right, left)):
            sized = isinstance(seq, str | list | tuple) and isinstance(count, int)
            if sized and _weight(seq) * count > MAX_REPEAT:
                raise _TooBig(f"repetition would build more than {MAX_REPEAT:,} items")
        result = operator.mul(left, right)
        if isinstance(result, str | list | tuple):
            _charge(_weight(result))
        return result

    def concat_bounded(self, values: tuple[Any, ...]) -> str:
        result = "".join(map(str, values))
        _charge(len(result))
        return result

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        # A string method with a huge width or count (`'x'.ljust(10**8)`, `.expandtabs(10**6)`).
        if isinstance(__obj, types.BuiltinMethodType) and isinstance(__obj.__self__, str):
            for value in (*args, *kwargs.values()):
                _check_width(value)
            if __obj.__name__ in ("join", "replace"):
                grown = sum(_weight(a) for a in args) * max(1, len(__obj.__self__))
                if grown > MAX_REPEAT * 16:
                    raise _TooBig(f"{__obj.__name__} would build too much text")
        result = super().call(__context, __obj, *args, **kwargs)
        if isinstance(result, str):
            _charge(len(result))
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        for _, _, spec, _ in string.Formatter().parse(value.__self__):
            if spec:
                _check_spec(spec)

        def bounded(*args: Any, **kwargs: Any) -> str:
            result = wrapped(*args, **kwargs)
            _charge(len(result))
            return result

        return bounded


def _finalize(value: Any) -> str:
    """Every ``{{ value }}`` output (also inside ``{% set %}`` blocks and macros) counts."""
    text = value if isinstance(value, str) else str(value)
    _charge(len(text))
    return text


class _ContainedLoader(jinja2.FileSystemLoader):
    """Templates from the search folders only, after following symlinks (Jinja refuses ``..``
    in names but follows a link out of the folder)."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Any]:
        source, filename, uptodate = super().get_source(environment, template)
        folder = next((Path(p) for p in self.searchpath if Path(filename).is_relative_to(p)), None)
        if folder is None or check_inside(Path(filename), folder) is None:
            raise TemplateError(
                f"template file {template!r} resolves to a file outside the spec's folder",
                hint="Keep templates beside the spec (not links to files elsewhere), or let the "
                "operator allow the folder (--data-root)",
                code="template_outside",
            )
        return source, filename, uptodate


@functools.cache
def jinja_env(base_dir: Path | None = None) -> jinja2.Environment:
    """The sandboxed environment that loads templates from ``base_dir`` then ``templates/``."""
    search = [str(base_dir)] if base_dir is not None else []
    search.append(str(templates_dir()))
    env = _Sandbox(
        loader=_ContainedLoader(search),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
    )
    for name, widths in (("center", (1,)), ("indent", (1,)), ("wordwrap", (1,)), ("truncate", (1,))):
        env.filters[name] = _bounded_filter(env.filters[name], widths)
    for name in ("join", "tojson", "pprint", "string", "list", "map", "batch", "slice", "urlize"):
        env.filters[name] = _bounded_filter(env.filters[name], ())
    env.filters["replace"] = _bounded_replace
    env.filters["format"] = _bounded_format
    env.globals["lipsum"] = _bounded_lipsum
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
        self.seconds, self.max_chars = _limits.get()
        """This template's render budget: the defaults, or its spec's ``limits:``."""
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
        self.bounded: bool = next(ast.find_all(_UNBOUNDED_NODES), None) is None and _inline(ast)
        """It only shows fields (:func:`_inline`): a render is one pass over them, so it may run
        on the event loop, untimed. Every other template renders under the deadline, and the
        server renders it off the loop."""

    def render(self, context: Mapping[str, Any]) -> str:
        """Render over ``context`` within the budgets; any failure is a :class:`TemplateError`."""
        outer = getattr(_budget, "left", None)
        if outer is None:
            _budget.left = _budget.limit = self.max_chars
        try:
            if self.bounded:
                return self._template.render(context)
            try:
                with budget.deadline(self.seconds):
                    return self._template.render(context)
            except budget.Overrun:
                raise TemplateError(
                    f"{self.name}: rendering took longer than {self.seconds:g} s and was stopped",
                    hint="A loop in the template runs too long; loop over the task's fields only "
                    "(or raise `limits.render_seconds` in the spec)",
                    code="template_budget",
                ) from None
        except TemplateError:
            raise
        except _TooBig as exc:
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
                _budget.left = None


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
