"""The ``state`` tool: reads and simple updates of the episode's state document, declared in YAML.

One tool does one operation at a path of the document, where ``{param}`` is replaced by the
call's argument (``orders/{order_id}/status``):

* ``get``: the value at the path, as JSON;
* ``find``: the key of the first item of a collection whose fields equal ``where``
  (``{email: "{email}"}``);
* ``set``: put ``value`` at the path; ``append``: add ``value`` to the list at the path;
  ``remove``: delete the key at the path.

``require`` lists preconditions checked before anything changes (the path exists, its value
equals or is one of given values); a failed one is the call's error output, with the spec's
``error`` text. In ``value`` and ``where``, a string that is exactly ``"{param}"`` is the
argument itself (a number stays a number); other strings are formatted with the arguments.
"""

from __future__ import annotations

import json
import re
from collections.abc import MutableMapping
from typing import Any, Literal

import orjson
from pydantic import Field, model_validator

from envbuilder.errors import ToolError
from envbuilder.plugins import ConfigModel
from envbuilder.tools._base import Tool, ToolCall, ToolConfig, ToolContext, ToolReply

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_MISSING: Any = object()


class Requirement(ConfigModel):
    """A precondition of a call: what must hold at `path` before anything changes."""

    path: str = Field(min_length=1)
    """A path in the document, e.g. `orders/{order_id}/status`."""
    exists: bool = True
    """The path must exist (with `false`: must not)."""
    equals: Any = None
    """The value there must equal this (not checked when unset)."""
    one_of: list[Any] | None = None
    """The value there must be one of these."""
    error: str
    """What the agent reads when the precondition fails (formatted with the arguments)."""


class StateToolConfig(ToolConfig):
    """A read or a simple update of the episode's state (`state:`) at a path."""

    type: Literal["state"]
    op: Literal["get", "find", "set", "append", "remove"]
    """`get` the value at `path`; `find` the key of the first item of the collection at `path`
    matching `where`; `set` `value` at `path`; `append` `value` to the list at `path`;
    `remove` the key at `path`."""
    path: str = Field(min_length=1)
    """Where in the document, as keys separated by `/`, with `{param}` for arguments."""
    where: dict[str, Any] | None = None
    """With `find`: item fields (a `/`-path inside the item) and the values they must equal."""
    value: Any = None
    """With `set` and `append`: the JSON value to put (strings may hold `{param}`)."""
    require: list[Requirement] = Field(default_factory=list)
    """Preconditions checked in order before the operation."""
    not_found: str = "{path} not found"
    """The error text when `path` (or, for `find`, a match) does not exist; `{path}` is the
    path with the arguments filled in."""
    output: str | None = None
    """The text of a successful update (formatted with the arguments; default: the changed
    value as JSON)."""

    @model_validator(mode="after")
    def _consistent(self) -> StateToolConfig:
        if (self.op == "find") != (self.where is not None):
            raise ValueError("`where` goes with `op: find`, and `find` needs it")
        if self.op in ("set", "append") and "value" not in self.model_fields_set:
            raise ValueError(f"`op: {self.op}` needs `value`")
        return self


def _fill(text: str, args: dict[str, Any]) -> Any:
    whole = _PLACEHOLDER.fullmatch(text)
    if whole:
        return args.get(whole.group(1))
    return _PLACEHOLDER.sub(lambda m: str(args.get(m.group(1), m.group(0))), text)


def _filled(value: Any, args: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return _fill(value, args)
    if isinstance(value, dict):
        return {k: _filled(v, args) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, args) for v in value]
    return value


def _keys(path: str, args: dict[str, Any]) -> list[str]:
    return [str(_fill(part, args)) for part in path.strip("/").split("/")]


def _step(node: Any, key: str, read_only: bool) -> Any:
    if read_only and hasattr(node, "peek"):  # a collection: read its item without copying it
        return node.peek(key, _MISSING)
    if isinstance(node, MutableMapping | dict):
        return node.get(key, _MISSING)
    digits = key[1:] if key.startswith("-") else key
    if isinstance(node, list) and digits.isascii() and digits.isdigit() and len(digits) <= 18:
        i = int(key)  # (a key from a call's input: ASCII digits of a plausible length only)
        return node[i] if -len(node) <= i < len(node) else _MISSING
    return _MISSING


def resolve(root: Any, keys: list[str], *, read_only: bool = False) -> Any:
    """The value at ``keys`` below ``root`` (``_MISSING`` when a step does not exist); with
    ``read_only`` the value may be the shared document's own: never change it."""
    node = root
    for key in keys:
        node = _step(node, key, read_only)
        if node is _MISSING:
            break
    return node


class StateTool(Tool):
    Config = StateToolConfig
    config: StateToolConfig
    uses_document = True
    description = "Read or update the record at a path."

    def __init__(self, config: StateToolConfig, context: ToolContext):
        super().__init__(config, context)
        names = set(_PLACEHOLDER.findall(config.path))
        for req in config.require:
            names |= set(_PLACEHOLDER.findall(req.path))
        params = set(config.input or {})
        unknown = sorted(names - params)
        if unknown:
            raise ToolError(
                f"the path uses {', '.join(map(repr, unknown))}, which `input:` does not declare",
                hint="Declare every {param} of `path` and `require` under `input:`",
                loc=("input",),
            )

    async def run(self, call: ToolCall) -> ToolReply:
        if call.document is None:
            raise ToolError("this tool needs the episode's state, and the spec declares no `state:`")
        cfg, args, doc = self.config, call.args, call.document
        for req in cfg.require:
            value = resolve(doc, _keys(req.path, args), read_only=True)
            ok = (value is not _MISSING) == req.exists
            if ok and value is not _MISSING:
                if "equals" in req.model_fields_set and value != _filled(req.equals, args):
                    ok = False
                if req.one_of is not None and value not in _filled(req.one_of, args):
                    ok = False
            if not ok:
                raise ToolError(str(_fill(req.error, args)))
        keys = _keys(cfg.path, args)
        missing = str(_fill(cfg.not_found, {**args, "path": "/".join(keys)}))
        if cfg.op in ("get", "find", "append"):
            target = resolve(doc, keys, read_only=cfg.op != "append")
            if target is _MISSING:
                raise ToolError(missing)
            if cfg.op == "get":
                return ToolReply.text(_json(target))
            if cfg.op == "find":
                return ToolReply.text(self._find(target, args, missing))
            if not isinstance(target, list):
                raise ToolError(f"{'/'.join(keys)} is not a list")
            target.append(_filled(cfg.value, args))
            return ToolReply.text(self._said(args, target))
        parent = resolve(doc, keys[:-1])
        if parent is _MISSING or not isinstance(parent, MutableMapping | dict):
            raise ToolError(missing)
        if cfg.op == "set":
            parent[keys[-1]] = _filled(cfg.value, args)
            return ToolReply.text(self._said(args, parent[keys[-1]]))
        if keys[-1] not in parent:
            raise ToolError(missing)
        del parent[keys[-1]]
        return ToolReply.text(self._said(args, None))

    def _find(self, collection: Any, args: dict[str, Any], missing: str) -> str:
        assert self.config.where is not None
        where = [(k.strip("/").split("/"), _filled(v, args)) for k, v in self.config.where.items()]
        if not isinstance(collection, MutableMapping | dict):
            raise ToolError(missing)
        peek = getattr(collection, "peek", collection.get)  # a search copies nothing
        for key in collection:
            item = peek(key)
            for path, want in where:
                node = item
                for step in path:  # plain dicts inside an item: walked inline (the hot loop)
                    node = (
                        node.get(step, _MISSING)
                        if type(node) is dict
                        else resolve(node, [step], read_only=True)
                    )
                    if node is _MISSING:
                        break
                if node != want:
                    break
            else:
                return str(key)
        raise ToolError(missing)

    def _said(self, args: dict[str, Any], value: Any) -> str:
        if self.config.output is not None:
            return str(_fill(self.config.output, args))
        return _json(value)


def _json(value: Any) -> str:
    if isinstance(value, MutableMapping) and not isinstance(value, dict):
        value = {k: value.peek(k) for k in value} if hasattr(value, "peek") else dict(value.items())
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False)
