"""The bounded Jinja sandbox: the one environment factory, with everything that can grow capped
(repetition, powers, widths, formatting) and each render's characters counted against a budget."""

from __future__ import annotations

import functools
import json
import operator
import re
import string
import threading
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jinja2
import jinja2.compiler
import jinja2.filters
import jinja2.meta
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from envbuilder.errors import TemplateError
from envbuilder.paths import check_inside


def templates_dir() -> Path:
    """The templates shipped with envbuilder (in a wheel: ``envbuilder/templates``)."""
    package = Path(__file__).parent.parent
    packaged = package / "templates"
    return packaged if packaged.is_dir() else package.parent / "templates"


#: Largest string/list a template may build with ``*`` and largest exponent of ``**``:
#: a spec is untrusted, and ``{{ 'x' * 10**12 }}`` must not take the server down.
MAX_REPEAT = 1_000_000
MAX_EXPONENT = 64
#: Largest field width or padding (``'{:>99999999}'.format(1)``, ``center(10**8)``).
MAX_WIDTH = 10_000
#: Characters one render may build in all (output, joins, repetitions, formatting): a template
#: doubling a string in a loop stops here, long before memory runs out.
MAX_RENDER_CHARS = 16_000_000
#: Seconds one render may take (a template that only shows fields is not timed: see :func:`inline`).
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
    jinja2.nodes.Call,
    jinja2.nodes.Slice,
    jinja2.nodes.Neg,
)
#: Methods a field's value may call inline: one C pass over it (``answer.split('####')[-1]``).
_INLINE_METHODS = frozenset(
    {"split", "rsplit", "strip", "lstrip", "rstrip", "lower", "upper", "startswith", "endswith", "splitlines"}
)
_INLINE_FILTERS = frozenset(
    {"trim", "lower", "upper", "string", "default", "d", "e", "escape", "length", "count", "int", "float"}
)
_INLINE_TESTS = frozenset({"defined", "undefined", "none", "string", "number", "mapping", "sequence"})


def inline(ast: jinja2.nodes.Template) -> bool:
    """Whether every node of ``ast`` is one :data:`_INLINE_NODES` allows."""
    for node in ast.find_all(jinja2.nodes.Node):
        if not isinstance(node, _INLINE_NODES):
            return False
        if isinstance(node, jinja2.nodes.Filter) and node.name not in _INLINE_FILTERS:
            return False
        if isinstance(node, jinja2.nodes.Test) and node.name not in _INLINE_TESTS:
            return False
        if isinstance(node, jinja2.nodes.Call) and not (
            isinstance(node.node, jinja2.nodes.Getattr)
            and node.node.attr in _INLINE_METHODS
            and all(isinstance(a, jinja2.nodes.Const) for a in node.args)
            and not (node.kwargs or node.dyn_args or node.dyn_kwargs)
        ):
            return False
    return True


#: Nodes that can make a render run long: loops, macros (recursion), other templates.
UNBOUNDED_NODES = (
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


class TooBig(SecurityError):
    """The render would build more than its budget allows."""


render_budget = threading.local()
"""``left``: characters the render running in this thread may still build (unset: no budget);
``limit``: that render's whole allowance (for the message)."""


def _charge(size: int) -> None:
    left: int | None = getattr(render_budget, "left", None)
    if left is not None:
        left -= size
        render_budget.left = left
        if left < 0:
            limit = getattr(render_budget, "limit", MAX_RENDER_CHARS)
            raise TooBig(f"the render would build more than {limit:,} characters")


def _weight(value: Any) -> int:
    """Characters a value stands for (a list of strings: their total, not its length)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list | tuple):
        return sum(len(v) if isinstance(v, str) else 1 for v in value)
    return 1


def _check_width(width: Any) -> None:
    if isinstance(width, int) and abs(width) > MAX_WIDTH:
        raise TooBig(f"a width of {width:,} is not allowed (at most {MAX_WIDTH:,})")


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
        raise TooBig(f"replace would build more than {MAX_REPEAT:,} characters")
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
                raise TooBig(f"repetition would build more than {MAX_REPEAT:,} items")
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
                    raise TooBig(f"{__obj.__name__} would build too much text")
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
def jinja_env(base_dir: Path | None = None, *more: Path) -> jinja2.Environment:
    """The sandboxed environment that loads templates from ``base_dir``, then the folders
    ``more`` (a spec's bases), then ``templates/``."""
    search = [str(base_dir)] if base_dir is not None else []
    search += [str(folder) for folder in more]
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
