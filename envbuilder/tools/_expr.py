"""Computed values of declarative tools: expressions and templated JSON over a call's variables.

A declarative tool's conditions (``require: order.status == 'pending'``) are sandboxed Jinja
*expressions*, and its values (``value:``, ``by:``, ``output:``, paths, error texts) are JSON
whose strings may compute:

* a string that is exactly ``"{{ expr }}"`` is the expression's value, with its type (a number
  stays a number, a list a list);
* another string holding ``{{ … }}`` is text, rendered like a template (no ``{% %}`` blocks);
* a string holding ``{name}`` (the older form) has each name replaced by the variable's value
  (``"{param}"`` alone is the value itself);
* anything else is a constant.

The expressions run in the project's one Jinja sandbox (:func:`envbuilder.templating.jinja_env`):
no attribute walks to Python internals, no changes to the values they read, every string or
list they build counted against :data:`MAX_CALL_CHARS`, and no loops (a template block is
refused): a call's work is bounded by its steps, its ``for_each`` lists and the state's size.
Two globals are added for building objects: ``zip`` and ``dict`` (Jinja's).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

import jinja2
import jinja2.meta
import jinja2.nodes
from jinja2.sandbox import SecurityError

from envbuilder.errors import Loc, ToolError, did_you_mean
from envbuilder.templating import jinja_env

#: Characters (strings, list items) one call's expressions may build in all.
MAX_CALL_CHARS = 1_000_000
#: Longest expression or templated string a spec may give.
MAX_SOURCE = 4_000

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_WHOLE = re.compile(r"^\s*\{\{(.*)\}\}\s*$", re.S)
_BLOCK = ("{%", "{#")


@functools.cache
def _env() -> jinja2.Environment:
    """The sandbox of templates, with ``zip`` (built on first use, not at import)."""
    env = jinja_env(None).overlay()
    env.globals = {**env.globals, "zip": zip}
    return env


#: What an expression over the wrong types raises (``'a' - 1``, ``xs[9]``, ``1 / 0``).
_FAILURES = (TypeError, ValueError, KeyError, IndexError, ArithmeticError)


class Evaluation(Exception):
    """An expression failed at run time (undefined name, wrong type, over budget)."""


def _compile(source: str, loc: Loc, *, text: bool) -> tuple[Any, frozenset[str]]:
    if len(source) > MAX_SOURCE:
        raise ToolError(
            f"the expression is {len(source):,} characters long (at most {MAX_SOURCE:,})", loc=loc
        )
    if any(mark in source for mark in _BLOCK):
        raise ToolError(
            f"{source!r} holds a template block: values compute with `{{{{ expression }}}}` only",
            hint="Use an expression (`{{ items | sum(attribute='price') }}`) or a `for_each` step",
            loc=loc,
        )
    env = _env()
    try:
        if text:
            ast = env.parse(source)
            template = env.from_string(ast)
        else:
            ast = env.parse("{{ " + source + " }}")
            template = env.compile_expression(source, undefined_to_none=False)._template
    except jinja2.TemplateSyntaxError as exc:
        raise ToolError(f"syntax error in {source!r}: {exc.message}", loc=loc) from None
    return _Run(template), frozenset(jinja2.meta.find_undeclared_variables(ast)) - set(env.globals)


class _Run:
    """A compiled template run with the call's variables over a flat copy of the globals:
    Jinja's own call merges its chained globals on every call, most of an expression's cost."""

    __slots__ = ("globals", "template")

    def __init__(self, template: jinja2.Template):
        self.template = template
        self.globals = dict(template.globals)

    def context(self, variables: Mapping[str, Any]) -> Any:
        return self.template.new_context({**self.globals, **variables}, shared=True)

    def value(self, variables: Mapping[str, Any]) -> Any:
        """An expression's value (it is compiled as ``{% set result = … %}``)."""
        ctx = self.context(variables)
        for _ in self.template.root_render_func(ctx):
            pass
        return ctx.vars["result"]

    def text(self, variables: Mapping[str, Any]) -> str:
        return str(self.template.environment.concat(self.template.root_render_func(self.context(variables))))


class Expr:
    """A compiled condition or computation (``order.status == 'pending'``; a wrapping
    ``{{ }}`` is allowed)."""

    def __init__(self, source: str, loc: Loc):
        whole = _WHOLE.match(source)
        self.source = whole.group(1).strip() if whole else source.strip()
        self.loc = loc
        self._run, self.names = _compile(self.source, loc, text=False)

    def __call__(self, variables: Mapping[str, Any]) -> Any:
        try:
            return _defined(self._run.value(variables))
        except (jinja2.TemplateError, SecurityError) as exc:
            raise Evaluation(f"{self.source!r}: {exc}") from None
        except _FAILURES as exc:
            raise Evaluation(f"{self.source!r}: {type(exc).__name__}: {exc}") from None


class Value:
    """JSON whose strings may compute (see the module's docstring), compiled once."""

    def __init__(self, value: Any, loc: Loc):
        self.loc = loc
        self.names: frozenset[str] = frozenset()
        self._fn = self._build(value, loc)
        self.constant = not self.names and not _computes(value)
        self._const = value

    def _build(self, value: Any, loc: Loc) -> Any:
        if isinstance(value, str):
            return self._string(value, loc)
        if isinstance(value, dict):
            parts = [(k, self._build(v, (*loc, k))) for k, v in value.items()]
            return lambda vs: {k: fn(vs) for k, fn in parts}
        if isinstance(value, list):
            items = [self._build(v, (*loc, i)) for i, v in enumerate(value)]
            return lambda vs: [fn(vs) for fn in items]
        return lambda vs: value

    def _string(self, text: str, loc: Loc) -> Any:
        whole = _WHOLE.match(text)
        if whole and "{{" not in whole.group(1) and "}}" not in whole.group(1):
            expr = Expr(text, loc)
            self.names |= expr.names
            return expr
        if "{{" in text or any(mark in text for mark in _BLOCK):
            template, names = _compile(text, loc, text=True)
            self.names |= names

            def render(vs: Mapping[str, Any]) -> str:
                try:
                    return template.text(vs)
                except (jinja2.TemplateError, SecurityError) as exc:
                    raise Evaluation(f"{text!r}: {exc}") from None
                except _FAILURES as exc:
                    raise Evaluation(f"{text!r}: {type(exc).__name__}: {exc}") from None

            return render
        found = _PLACEHOLDER.findall(text)
        if not found:
            return lambda vs: text
        self.names |= set(found)
        single = _PLACEHOLDER.fullmatch(text)
        if single:
            name = single.group(1)
            return lambda vs: vs.get(name)
        return lambda vs: _PLACEHOLDER.sub(lambda m: _text(vs.get(m.group(1), m.group(0))), text)

    def __call__(self, variables: Mapping[str, Any]) -> Any:
        if self.constant:
            return self._const
        return self._fn(variables)


def _defined(value: Any) -> Any:
    """``value``, or the error of an undefined name or a refused attribute inside it (the
    sandbox returns those as :class:`jinja2.Undefined` values that fail only when used)."""
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()
    elif type(value) is dict:
        for item in value.values():
            _defined(item)
    elif type(value) is list or type(value) is tuple:
        for item in value:
            _defined(item)
    return value


def _computes(value: Any) -> bool:
    if isinstance(value, str):
        return "{" in value
    if isinstance(value, dict):
        return any(_computes(v) for v in value.values())
    if isinstance(value, list):
        return any(_computes(v) for v in value)
    return False


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def check_names(names: Iterable[str], known: Iterable[str], loc: Loc) -> None:
    """Refuse a name an expression reads that no input or earlier step defines."""
    known = sorted(set(known))
    for name in sorted(names):
        if name not in known:
            hint = did_you_mean(name, known) or (
                f"Defined here: {', '.join(known)}" if known else "Nothing is defined here yet"
            )
            raise ToolError(
                f"{name!r} is not defined here: neither an input nor a name an earlier step binds (`as:`)",
                hint=hint,
                loc=loc,
            )
