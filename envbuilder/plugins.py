"""Registries of pluggable parts by name: one :class:`Registry` type for every kind.

Spec plugins (dataset sources, graders, tools) are keyed by their YAML ``type:``; built-in ones
register exactly as a third-party package does: through an entry point in the
``envbuilder.sources``, ``envbuilder.graders`` or ``envbuilder.tools`` group naming a class with a
``Config`` (a :class:`ConfigModel` whose ``type`` field is a ``Literal`` of its YAML name).
Other parts (row generators, sandbox backends) are keyed by their entry point's name, or added
by name (:meth:`Registry.add`).

A registry loads a part when it is first asked for by name: a spec naming `exact_match`
imports that grader's module and no other (the judge's HTTP client, reasoning-gym's task
families and the MCP SDK are imported only by the specs that use them). Listing every part
(``names()``, ``config_models()``, the JSON Schema) loads them all.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import CoreRef, GenerateJsonSchema, JsonSchemaValue
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
    """Parts of one kind by name, loaded from an entry-point group when first asked for.

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
        self._lock = threading.RLock()
        self._declared: dict[str, EntryPoint] | None = None

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

    def _entry_points(self) -> dict[str, EntryPoint]:
        if self._declared is None:
            declared = _all_entry_points(tuple(sys.path)).select(group=self.group)
            self._declared = {ep.name: ep for ep in declared}
        return self._declared

    def _add_entry_point(self, ep: EntryPoint) -> None:
        item = ep.load()
        if isinstance(item, type) and hasattr(item, "Config"):
            self.register(item)
        else:
            self.add(ep.name, item)

    def _load(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            for name, ep in self._entry_points().items():
                if name not in self._items:
                    self._add_entry_point(ep)
            self._loaded = True

    def _load_one(self, name: str) -> T | None:
        """The part called ``name``, loading only its entry point; None when none is declared."""
        item = self._items.get(name)
        if item is not None:
            return item
        with self._lock:
            ep = self._entry_points().get(name)
            if name not in self._items and ep is not None:
                self._add_entry_point(ep)
            return self._items.get(name)

    def declared_names(self) -> list[str]:
        """The names of every part, registered or declared by an entry point, without loading any."""
        return sorted(set(self._items) | set(self._entry_points()))

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def get(self, name: str) -> T:
        """The part called ``name``.

        Raises:
            EnvbuilderError: (of the registry's ``error`` class) no part is called ``name``.
        """
        item = self._load_one(name)
        if item is not None:
            return item
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

    def config_model(self, name: str) -> type[ConfigModel]:
        """The config model of the plugin called ``name`` (loading only that plugin)."""
        model: type[ConfigModel] = getattr(self.get(name), "Config")  # noqa: B009
        return model


@functools.cache
def _all_entry_points(path: tuple[str, ...]) -> Any:
    """Every entry point installed on the import path ``path``, read once per path: each
    ``entry_points(group=...)`` call reads the metadata of every installed distribution again (a
    few hundred files), and there are several registries; a path that changes (a plugin folder
    added to ``sys.path``) is read again. (``SelectableGroups`` on Python 3.11, ``EntryPoints``
    later: both ``select``.)"""
    return entry_points()


def _type_literal(model: type[BaseModel]) -> str:
    field = model.model_fields.get("type")
    args: tuple[Any, ...] = getattr(field.annotation, "__args__", ()) if field else ()
    if len(args) != 1 or not isinstance(args[0], str):
        raise TypeError(f"{model.__name__}.type must be a Literal of one string")
    return str(args[0])


class PluginField:
    """Pydantic annotation: validate a YAML block with the config of its ``type:``.

    ``Annotated[ConfigModel, PluginField(registry)]`` becomes a tagged union over every plugin's
    name, so errors are located inside the block (``grader.exact_match.pattern``) and an unknown
    ``type:`` lists the known ones. Each choice validates with its config model, loaded when a
    block first names it: building the union imports no plugin, and a spec imports only the
    plugins it uses. The JSON Schema lists each type with its own keys (it loads them all).
    """

    def __init__(self, registry: Registry[Any]):
        self.registry = registry

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        choices: dict[Any, CoreSchema] = {
            name: core_schema.with_info_plain_validator_function(self._validator(name))
            for name in self.registry.declared_names()
        }
        return core_schema.tagged_union_schema(choices, discriminator="type")

    def _validator(self, name: str) -> Callable[[Any, core_schema.ValidationInfo], Any]:
        registry = self.registry

        def validate(value: Any, info: core_schema.ValidationInfo) -> Any:
            # A ValidationError raised here keeps its errors, located under this choice's tag.
            return registry.config_model(name).model_validate(value, context=info.context)

        return validate

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # The union pydantic would write for the eagerly built tagged union: each config once in
        # `$defs`, referenced by `oneOf` and the discriminator's mapping. A config holding a block
        # of the same kind (a composite grader) meets this union again while its own definition
        # is being written: it is then only referenced.
        generator: GenerateJsonSchema = handler.generate_json_schema  # type: ignore[attr-defined]
        started: set[str] = generator.__dict__.setdefault("_envbuilder_plugin_defs", set())
        refs: dict[str, JsonSchemaValue] = {}
        for name, model in self.registry.config_models().items():
            core: Any = model.__pydantic_core_schema__
            inner = core.get("schema", {})  # a config holding a recursive model: its definitions around it
            ref = str(core.get("ref") or inner.get("ref") or inner.get("schema_ref") or "")
            if ref in started:
                refs[name] = generator.get_cache_defs_ref_schema(CoreRef(ref))[1]
            else:
                started.add(ref)
                refs[name] = generator.generate_inner(core)
        return {
            "oneOf": list(refs.values()),
            "discriminator": {"propertyName": "type", "mapping": {k: v["$ref"] for k, v in refs.items()}},
        }
