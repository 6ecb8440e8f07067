"""The ``function`` tool: domain logic written in Python, ``fn(state, **args)``.

The function lives in a module beside the spec (``module: shop.py``) or in an installed package
(``module: my_package.shop``). Its first parameter receives the episode's state document (a
:class:`~envbuilder.world.State`, used like the JSON object it stands for; changes are kept in
the session); the others are the tool's input: their type hints become the JSON Schema offered
to the model, and the docstring its description (the summary, and each parameter's line under
``Args:``). A call that breaks a rule of the domain raises :class:`~envbuilder.errors.ToolError`
or ``ValueError``: the agent reads the message as an error output and the state is left as it
was. What the function returns is the output: a string as it is, anything else as JSON.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import json
import re
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import typing_extensions
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic.errors import PydanticInvalidForJsonSchema, PydanticSchemaGenerationError
from typing_extensions import is_typeddict

from envbuilder.errors import Loc, ToolError
from envbuilder.tools._base import Tool, ToolCall, ToolConfig, ToolContext, ToolReply

MODULE_PATTERN = r"^([A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*(\.py)?$|^[A-Za-z0-9_./-]+\.py$"


class FunctionConfig(ToolConfig):
    """A Python function over the episode's state: `fn(state, **args)`, its schema from the
    signature's type hints and its docstring."""

    type: Literal["function"]
    module: str = Field(pattern=MODULE_PATTERN)
    """A `.py` file beside the spec (`shop.py`) or an installed module (`my_package.shop`)."""
    function: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The function's name in the module (default: the tool's `name`)."""

    def runs_code(self) -> tuple[Loc, str]:
        return ("module",), f"imports and runs the Python module {self.module!r}"


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


def load_module(module: str, base_dir: Path | None) -> Any:
    """The module a spec names: a file inside the spec's folder, or an importable module."""
    if not module.endswith(".py"):
        try:
            return importlib.import_module(module)
        except ImportError as exc:
            raise ToolError(
                f"cannot import the module {module!r}: {exc}",
                hint="Install the package, or give a .py file beside the spec",
                loc=("module",),
            ) from None
        except (Exception, SystemExit) as exc:  # a module that raises (or exits) as it loads
            raise ToolError(
                f"the module {module!r} fails to load: {type(exc).__name__}: {exc}", loc=("module",)
            ) from None
    base = (base_dir or Path.cwd()).resolve()
    path = (base / module).resolve()
    if not path.is_relative_to(base):
        raise ToolError(
            f"the module {module!r} is outside the spec's folder",
            hint="Put the .py file beside the spec",
            loc=("module",),
        )
    if not path.is_file():
        raise ToolError(f"no file {module!r} beside the spec", hint=f"Looked for {path}", loc=("module",))
    name = f"envbuilder_spec_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(loaded)
    except (Exception, SystemExit) as exc:  # SystemExit: `sys.exit()` at import must not end validate
        raise ToolError(
            f"the module {module!r} fails to load: {type(exc).__name__}: {exc}", loc=("module",)
        ) from None
    sys.modules[name] = loaded
    return loaded


def _docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The summary of ``fn``'s docstring and each parameter's description under ``Args:``."""
    doc = inspect.getdoc(fn) or ""
    summary, _, rest = doc.partition("\n\n")
    params: dict[str, str] = {}
    section = re.search(r"^(?:Args|Arguments|Parameters):\s*\n((?:[ \t]+.*\n?|\s*\n)*)", rest, re.M)
    if section:
        current = None
        for line in section.group(1).splitlines():
            m = re.match(r"^\s{2,}(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
            if m and (current is None or len(line) - len(line.lstrip()) <= _indent(section.group(1))):
                current = m.group(1)
                params[current] = m.group(2).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    return " ".join(summary.split()), params


def _indent(block: str) -> int:
    for line in block.splitlines():
        if line.strip():
            return len(line) - len(line.lstrip())
    return 0


def _portable(hint: Any) -> Any:
    """``hint`` with every ``typing.TypedDict`` in it rebuilt as a ``typing_extensions.TypedDict``:
    pydantic refuses the former on Python < 3.12, and an author writes the former."""
    if is_typeddict(hint) and type(hint).__module__ == "typing":
        fields = get_type_hints(hint)
        required = getattr(hint, "__required_keys__", frozenset(fields))
        rebuilt = typing_extensions.TypedDict(  # type: ignore[misc]
            hint.__name__,
            {
                key: _portable(value) if key in required else typing_extensions.NotRequired[_portable(value)]
                for key, value in fields.items()
            },
        )
        rebuilt.__doc__ = hint.__doc__
        return rebuilt
    args = get_args(hint)
    origin = get_origin(hint)
    if not args or origin is Literal or isinstance(args[0], list):  # values, or Callable's [args]
        return hint
    new = tuple(_portable(a) for a in args)
    if all(a is b for a, b in zip(args, new, strict=True)):
        return hint
    if origin is Annotated:
        return Annotated[new]
    if origin is Union or origin is types.UnionType:
        return Union[new]  # noqa: UP007 (a union built from a tuple of types)
    if isinstance(hint, types.GenericAlias):
        return types.GenericAlias(origin, new)
    return hint.copy_with(new)


def _schema_problem(hint: Any) -> str | None:
    """Why ``hint`` cannot become a parameter's JSON Schema (None: it can)."""
    try:
        TypeAdapter(hint).json_schema()
    except (PydanticSchemaGenerationError, PydanticInvalidForJsonSchema):
        return f"{getattr(hint, '__name__', None) or hint!s} has no JSON Schema"
    except Exception as exc:  # pydantic's other schema errors, and whatever an odd hint raises
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return first
    return None


def signature_model(name: str, fn: Callable[..., Any]) -> tuple[type[BaseModel], str]:
    """The input model of ``fn``'s parameters after the first, and its description."""
    summary, described = _docstring(fn)
    try:
        hints = get_type_hints(fn)
    except Exception as exc:  # a hint naming something the module does not import
        raise ToolError(f"the type hints of {name}() cannot be read: {exc}", loc=("function",)) from None
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:  # a builtin or a callable object without one
        raise ToolError(
            f"{name} has no Python signature to read ({exc})",
            hint=f"Write def {name}(state, ...) in the module",
            loc=("function",),
        ) from None
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        raise ToolError(
            f"{name}() must take the state as its first parameter: def {name}(state, ...)",
            loc=("function",),
        )
    fields: dict[str, Any] = {}
    bad: list[str] = []
    for p in params[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ToolError(f"{name}() takes *args or **kwargs; name every parameter", loc=("function",))
        if p.name not in hints:
            raise ToolError(
                f"the parameter {p.name!r} of {name}() has no type hint",
                hint="Annotate it (str, int, float, bool, list[str], …): it becomes the input schema",
                loc=("function",),
            )
        if p.name.startswith("_") or hasattr(BaseModel, p.name):
            bad.append(f"{p.name!r} (a name the input model reserves)")
            continue
        hint = _portable(hints[p.name])
        problem = _schema_problem(hint)
        if problem is not None:
            bad.append(f"{p.name!r} ({problem})")
            continue
        default = ... if p.default is p.empty else p.default
        fields[p.name] = (hint, Field(default, description=described.get(p.name) or None))
    if bad:
        raise ToolError(
            f"the parameter{'s' if len(bad) > 1 else ''} {', '.join(bad)} of {name}() "
            f"cannot become the tool's input schema",
            hint="Name parameters without a leading `_` or `model_`, and type them with JSON types: "
            "str, int, float, bool, None, list[...], dict[str, ...], Literal[...], a TypedDict or a "
            "pydantic model of those",
            loc=("function",),
        )
    try:
        model = create_model(f"{name}_input", __base__=_Input, **fields)
        model.model_json_schema()
    except Exception as exc:  # a parameter name pydantic refuses (`model_config`, `_x`), a default
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ToolError(
            f"the parameters of {name}() cannot become the tool's input schema: {first}",
            hint="Rename the parameter, or give it a JSON value as its default",
            loc=("function",),
        ) from None
    return model, summary


class FunctionTool(Tool):
    Config = FunctionConfig
    config: FunctionConfig
    uses_document = True

    def __init__(self, config: FunctionConfig, context: ToolContext):
        super().__init__(config, context)
        attr = config.function or config.name
        if attr is None:
            raise ToolError("a function tool needs `name` or `function`", loc=("function",))
        module = load_module(config.module, context.base_dir)
        fn = getattr(module, attr, None)
        if not callable(fn):
            raise ToolError(
                f"the module {config.module!r} has no function {attr!r}",
                hint=_names_hint(module, attr),
                loc=("function",) if config.function else ("name",),
            )
        self.fn: Callable[..., Any] = fn
        self._model, summary = signature_model(attr, fn)
        if config.description is None:  # the docstring's summary is what the model is offered
            self.config = config.model_copy(update={"description": summary or None})
        self.source_file: Path | None = Path(module.__file__) if getattr(module, "__file__", None) else None
        if config.input is not None:
            raise ToolError(
                "a function tool takes its input schema from the function's signature",
                hint="Remove `input:`; annotate the function's parameters instead",
                loc=("input",),
            )

    @property
    def name(self) -> str:
        return str(self.config.name or self.config.function)

    def input_model(self) -> type[BaseModel]:
        return self._model

    async def run(self, call: ToolCall) -> ToolReply:
        if call.document is None:
            raise ToolError("this tool needs the episode's state, and the spec declares no `state:`")
        try:
            result = self.fn(call.document, **call.args)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        if isinstance(result, str):
            return ToolReply.text(result)
        return ToolReply.text(json.dumps(result, ensure_ascii=False, default=_plain))


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if hasattr(value, "items"):
        return dict(value.items())
    raise TypeError(f"{type(value).__name__} is not JSON")


def _names_hint(module: Any, name: str) -> str:
    from envbuilder.errors import did_you_mean

    names = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")]
    return did_you_mean(name, names) or f"Functions in the module: {', '.join(sorted(names)[:12])}"
