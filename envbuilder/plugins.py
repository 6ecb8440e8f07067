"""Registries of pluggable parts by name: one :class:`Registry` type for every kind.

Spec plugins (dataset sources, graders, tools) are keyed by their YAML ``type:``; built-in ones
register exactly as a third-party package does: through an entry point in the
``envbuilder.sources``, ``envbuilder.graders`` or ``envbuilder.tools`` group naming a class with a
``Config`` (a :class:`ConfigModel` whose ``type`` field is a ``Literal`` of its YAML name).
Other parts (row generators, sandbox backends) are keyed by their entry point's name, or added
by name (:meth:`Registry.add`).
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


T = TypeVar("T")


class Registry(Generic[T]):
    """Parts of one kind by name, loaded once from an entry-point group.

    An entry point naming a :class:`Plugin` class (one with a ``Config``) is registered under
    its ``Config``'s ``type`` literal (:meth:`register`); any other object (a function, a class)
    under the entry point's name. An unknown name is an error of class ``error`` saying
    "unknown ``what`` 'x'", with "Did you mean …?" or the known names.

    Args:
        kind: what the parts are, in error codes (``unknown_grader``).
        group: the entry-point group third-party packages add parts through.
        what: the phrase after "unknown" (default ``"{kind} type"``).
        known: the word for the known names in the hint (default ``"types"``).
        error: the exception raised for an unknown name.
    """

    def __init__(
        self,
        kind: str,
        group: str,
        *,
        what: str | None = None,
        known: str = "types",
        error: type[EnvbuilderError] = EnvbuilderError,
    ):
        self.kind = kind
        self.group = group
        self.what = what or f"{kind} type"
        self.known = known
        self.error = error
        self._items: dict[str, T] = {}
        self._loaded = False
        self._lock = threading.Lock()

    def add(self, name: str, item: T) -> T:
        """Add ``item`` under ``name`` (a built-in part that comes with no entry point)."""
        self._items[name] = item
        return item

    def register(self, cls: Any) -> Any:
        """Add the :class:`Plugin` class ``cls`` under the ``type`` literal of its ``Config``."""
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
                    item = ep.load()
                    if isinstance(item, type) and hasattr(item, "Config"):
                        self.register(item)
                    else:
                        self.add(ep.name, item)
            self._loaded = True

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def get(self, name: str) -> T:
        """The part called ``name``.

        Raises:
            EnvbuilderError: (of the registry's ``error`` class) no part is called ``name``.
        """
        self._load()
        try:
            return self._items[name]
        except KeyError:
            known = f"Known {self.known}: {', '.join(self.names()) or 'none'}"
            raise self.error(
                f"unknown {self.what} {name!r}",
                hint=did_you_mean(name, self._items) or known,
                code=f"unknown_{self.kind}",
            ) from None

    def for_config(self, config: ConfigModel) -> T:
        return self.get(getattr(config, "type"))  # noqa: B009 - every Config has `type`

    def config_models(self) -> dict[str, type[ConfigModel]]:
        """The config model of each registered :class:`Plugin` class, by name."""
        self._load()
        return {name: cls.Config for name, cls in sorted(self._items.items()) if hasattr(cls, "Config")}


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
