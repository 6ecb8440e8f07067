"""Registries of pluggable parts (dataset sources, graders) keyed by their YAML ``type:``.

Built-in parts register exactly as a third-party package does: through an entry point in
the ``envbuilder.sources`` or ``envbuilder.graders`` group naming a class with a ``Config``
(a :class:`ConfigModel` whose ``type`` field is a ``Literal`` of its YAML name).
"""

from __future__ import annotations

import threading
from importlib.metadata import entry_points
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from envbuilder.errors import EnvbuilderError, Loc, did_you_mean

__all__ = ["ConfigModel", "PluginField", "Registry"]


class ConfigModel(BaseModel):
    """Base of every model a spec is validated with: unknown keys are errors, and each
    attribute docstring becomes the key's description in the JSON Schema."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    def runs_code(self) -> tuple[Loc, str] | None:
        """What this block runs of the spec's own choosing outside envbuilder's sandbox (a Python
        module it imports, a command it starts): the key inside the block that names it, and a
        phrase saying what it does; None (the default) when it runs none. A block that does is
        built only from the user's own folders or with ``--trust-code`` (``envbuilder.spec``'s
        code trust); a plugin type whose config names code to run overrides this."""
        return None


class Plugin:
    """What every registered part provides: its YAML name and its config model."""

    type_name: ClassVar[str]
    Config: ClassVar[type[ConfigModel]]


P = TypeVar("P", bound=Plugin)


class Registry(Generic[P]):
    """Plugins of one kind, loaded once from an entry-point group."""

    def __init__(self, kind: str, group: str):
        self.kind = kind
        self.group = group
        self._items: dict[str, type[P]] = {}
        self._loaded = False
        self._lock = threading.Lock()

    def register(self, cls: type[P]) -> type[P]:
        """Add ``cls`` under the ``type`` literal of its ``Config``."""
        name = _type_literal(cls.Config)
        cls.type_name = name
        self._items[name] = cls
        return cls

    def _load(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            for ep in entry_points(group=self.group):
                if ep.name not in self._items:
                    self.register(ep.load())
            self._loaded = True

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def get(self, name: str) -> type[P]:
        self._load()
        try:
            return self._items[name]
        except KeyError:
            raise EnvbuilderError(
                f"unknown {self.kind} type {name!r}",
                hint=did_you_mean(name, self._items) or f"Known types: {', '.join(self.names())}",
                code=f"unknown_{self.kind}",
            ) from None

    def for_config(self, config: ConfigModel) -> type[P]:
        return self.get(getattr(config, "type"))  # noqa: B009 - every Config has `type`

    def config_models(self) -> dict[str, type[ConfigModel]]:
        self._load()
        return {name: cls.Config for name, cls in sorted(self._items.items())}


def _type_literal(model: type[BaseModel]) -> str:
    field = model.model_fields.get("type")
    args: tuple[Any, ...] = getattr(field.annotation, "__args__", ()) if field else ()
    if len(args) != 1 or not isinstance(args[0], str):
        raise TypeError(f"{model.__name__}.type must be a Literal of one string")
    return str(args[0])


class PluginField:
    """Pydantic annotation: validate a YAML block with the config of its ``type:``.

    ``Annotated[ConfigModel, PluginField(registry)]`` becomes a tagged union of every
    registered config, so errors are located inside the block and the JSON Schema lists
    each type with its own keys.
    """

    def __init__(self, registry: Registry[Any]):
        self.registry = registry

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        choices: dict[Any, CoreSchema] = {
            name: handler.generate_schema(model) for name, model in self.registry.config_models().items()
        }
        return core_schema.tagged_union_schema(choices, discriminator="type")

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(schema)
