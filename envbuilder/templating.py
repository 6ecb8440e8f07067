"""The one Jinja factory: sandboxed, StrictUndefined, spec-relative and shipped templates."""

from __future__ import annotations

import functools
import string
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from envbuilder.errors import TemplateError

__all__ = ["Template", "jinja_env", "templates_dir"]


def templates_dir() -> Path:
    """The templates shipped with envbuilder (in a wheel: ``envbuilder/templates``)."""
    packaged = Path(__file__).parent / "templates"
    return packaged if packaged.is_dir() else Path(__file__).parent.parent / "templates"


def _letter(index: int) -> str:
    return string.ascii_uppercase[int(index)]


def _lettered(choices: Iterable[Any], sep: str = "\n", fmt: str = "{letter}. {choice}") -> str:
    return sep.join(fmt.format(letter=_letter(i), choice=c) for i, c in enumerate(choices))


@functools.cache
def jinja_env(base_dir: Path | None = None) -> jinja2.Environment:
    """The sandboxed environment that loads templates from ``base_dir`` then ``templates/``."""
    search = [str(base_dir)] if base_dir is not None else []
    search.append(str(templates_dir()))
    env = ImmutableSandboxedEnvironment(
        loader=jinja2.FileSystemLoader(search),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["letter"] = _letter
    env.filters["lettered"] = _lettered
    env.globals["letters"] = string.ascii_uppercase
    return env


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
        self.variables: frozenset[str] = frozenset(jinja2.meta.find_undeclared_variables(ast))

    def render(self, context: Mapping[str, Any]) -> str:
        """Render over ``context``; any failure is a :class:`TemplateError`."""
        try:
            return self._template.render(context)
        except SecurityError as exc:
            raise TemplateError(
                f"{self.name}: refused by the template sandbox: {exc}",
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
