"""A tool's parameters as declared in YAML, and the pydantic model that validates a call.

A parameter is any JSON Schema type: a scalar (``string``, ``integer``, ``number``,
``boolean``), an ``array`` of ``items`` or an ``object`` of ``properties``, each nested level
declared like a parameter, so a list of order lines or an address is one parameter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model, model_validator

from envbuilder.plugins import ConfigModel

__all__ = ["ParamName", "ParamSpec", "input_model"]

_SCALARS: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}
_JSON: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}
ParamName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
"""A parameter's name: a Python-like identifier (every provider's tool format accepts it)."""


class ParamSpec(ConfigModel):
    """One parameter of a tool: its JSON type, what it means, and its bounds."""

    type: Literal["string", "integer", "number", "boolean", "array", "object"] = "string"
    """The parameter's JSON type."""
    description: str = ""
    """What the parameter means, shown to the model."""
    required: bool | None = None
    """Whether a call must give it (default: unless it has a `default`). Inside an `object`,
    whether the property must be given."""
    default: str | int | float | bool | list[Any] | dict[str, Any] | None = None
    """The value used when a call omits it (makes it optional)."""
    enum: list[str | int | float] | None = Field(default=None, min_length=1)
    """The only values allowed."""
    minimum: float | None = None
    """The smallest number allowed (`integer`, `number`)."""
    maximum: float | None = None
    """The largest number allowed (`integer`, `number`)."""
    min_length: int | None = Field(default=None, ge=0)
    """The shortest string allowed."""
    max_length: int | None = Field(default=10_000, ge=1, le=1_000_000)
    """The longest string allowed (a call's input is bounded: 10,000 characters by default)."""
    items: ParamSpec | None = None
    """With `type: array`: what each element is (a parameter declaration without a name)."""
    min_items: int | None = Field(default=None, ge=0)
    """With `type: array`: the fewest elements allowed."""
    max_items: int = Field(default=100, ge=1, le=10_000)
    """With `type: array`: the most elements allowed (bounded: 100 by default)."""
    properties: dict[ParamName, ParamSpec] | None = None
    """With `type: object`: its keys, each declared like a parameter (no other key is allowed)."""

    @model_validator(mode="after")
    def _consistent(self) -> ParamSpec:
        numeric = self.type in ("integer", "number")
        if not numeric and (self.minimum is not None or self.maximum is not None):
            raise ValueError(f"`minimum`/`maximum` apply to integer and number parameters, not {self.type}")
        if self.type != "string" and self.min_length is not None:
            raise ValueError(f"`min_length` applies to string parameters, not {self.type}")
        if self.required and self.default is not None:
            raise ValueError("a parameter with a `default` is not `required`")
        if self.enum is not None and self.type not in ("string", "integer", "number"):
            raise ValueError(f"an {self.type} parameter takes no `enum`")
        if (self.type == "array") != (self.items is not None):
            raise ValueError("`items` goes with `type: array`, and an array needs it")
        if (self.type == "object") != (self.properties is not None):
            raise ValueError("`properties` goes with `type: object`, and an object needs it")
        if self.type != "array" and (self.min_items is not None or "max_items" in self.model_fields_set):
            raise ValueError(f"`min_items`/`max_items` apply to array parameters, not {self.type}")
        kinds = _JSON[self.type]
        for value in [*(self.enum or ()), *(() if self.default is None else (self.default,))]:
            ok = isinstance(value, kinds) and not (bool not in kinds and isinstance(value, bool))
            if not ok:
                raise ValueError(f"{value!r} is not a{'n' if self.type[0] in 'aeiou' else ''} {self.type}")
        if self.default is not None and self.type in ("array", "object"):
            try:  # a default must pass the parameter's own schema (it is what a call gets)
                TypeAdapter(_annotation("default", self, ())).validate_python(self.default)
            except ValidationError as exc:
                first = exc.errors(include_url=False)[0]
                where = ".".join(map(str, first["loc"])) or "the value"
                raise ValueError(
                    f"the default does not match the parameter ({where}: {first['msg']})"
                ) from None
        return self


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The schema with nested objects written in place: a declared parameter never refers to
        itself, and not every provider's tool format follows ``$ref``."""
        schema = super().model_json_schema(*args, **kwargs)
        defs = schema.pop("$defs", {})
        return _inlined(schema, defs) if defs else schema


def _inlined(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return {**_inlined(defs[ref.removeprefix("#/$defs/")], defs), **_inlined(rest, defs)}
        return {k: _inlined(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inlined(v, defs) for v in node]
    return node


def _annotation(name: str, p: ParamSpec, path: tuple[str, ...]) -> Any:
    """The type of one parameter (nested ones too), with its bounds as constraints (its
    description goes on the field that holds it)."""
    bounds: dict[str, Any] = {}
    kind: Any
    if p.type == "array":
        assert p.items is not None
        inner = _annotation(name, p.items, (*path, "items"))
        if p.items.description:
            inner = Annotated[inner, Field(description=p.items.description)]
        kind = list[inner]  # type: ignore[valid-type]
        bounds.update(min_length=p.min_items, max_length=p.max_items)
    elif p.type == "object":
        assert p.properties is not None
        kind = _model(f"{name}_{'_'.join(path) or 'value'}", p.properties, path)
    elif p.enum:
        kind = Literal[tuple(p.enum)]
    else:
        kind = _SCALARS[p.type]
        if p.type in ("integer", "number"):
            bounds.update(ge=p.minimum, le=p.maximum, strict=p.type == "integer")
        elif p.type == "string":
            bounds.update(min_length=p.min_length, max_length=p.max_length)
    return Annotated[kind, Field(**bounds)]


def _model(name: str, params: Mapping[str, ParamSpec], path: tuple[str, ...]) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for key, p in params.items():
        kind = _annotation(name, p, (*path, key))
        required = p.default is None if p.required is None else p.required
        described = p.description or None
        if required:
            fields[key] = (kind, Field(..., description=described))
        elif p.default is not None:
            fields[key] = (kind, Field(default=p.default, description=described))
        else:
            fields[key] = (kind | None, Field(default=None, description=described))
    return create_model(name, __base__=_Input, **fields)


def input_model(name: str, params: Mapping[str, ParamSpec]) -> type[BaseModel]:
    """The pydantic model of a tool's input (its JSON Schema is what the model is offered)."""
    return _model(f"{name}_input", params, ())
