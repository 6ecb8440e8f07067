"""A tool's parameters as declared in YAML, and the pydantic model that validates a call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from envbuilder.plugins import ConfigModel

__all__ = ["ParamName", "ParamSpec", "input_model"]

_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}
ParamName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
"""A parameter's name: a Python-like identifier (every provider's tool format accepts it)."""


class ParamSpec(ConfigModel):
    """One parameter of a tool: its JSON type, what it means, and its bounds."""

    type: Literal["string", "integer", "number", "boolean"] = "string"
    """The parameter's JSON type."""
    description: str = ""
    """What the parameter means, shown to the model."""
    required: bool | None = None
    """Whether a call must give it (default: unless it has a `default`)."""
    default: str | int | float | bool | None = None
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

    @model_validator(mode="after")
    def _consistent(self) -> ParamSpec:
        numeric = self.type in ("integer", "number")
        if not numeric and (self.minimum is not None or self.maximum is not None):
            raise ValueError(f"`minimum`/`maximum` apply to integer and number parameters, not {self.type}")
        if self.type != "string" and self.min_length is not None:
            raise ValueError(f"`min_length` applies to string parameters, not {self.type}")
        if self.required and self.default is not None:
            raise ValueError("a parameter with a `default` is not `required`")
        if self.enum is not None and self.type == "boolean":
            raise ValueError("a boolean parameter takes no `enum`")
        kind = _TYPES[self.type]
        for value in [*(self.enum or ()), *(() if self.default is None else (self.default,))]:
            ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                ok = True
            if not ok:
                raise ValueError(f"{value!r} is not a {self.type}")
        return self


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


def input_model(name: str, params: Mapping[str, ParamSpec]) -> type[BaseModel]:
    """The pydantic model of a tool's input (its JSON Schema is what the model is offered)."""
    fields: dict[str, Any] = {}
    for key, p in params.items():
        kind: Any = Literal[tuple(p.enum)] if p.enum else _TYPES[p.type]
        required = p.default is None if p.required is None else p.required
        bounds: dict[str, Any] = {"description": p.description or None}
        if p.type in ("integer", "number"):
            bounds.update(ge=p.minimum, le=p.maximum, strict=p.type == "integer")
        elif p.type == "string" and not p.enum:
            bounds.update(min_length=p.min_length, max_length=p.max_length)
        default = ... if required else p.default
        fields[key] = (kind if required or p.default is not None else kind | None, Field(default, **bounds))
    return create_model(f"{name}_input", __base__=_Input, **fields)
