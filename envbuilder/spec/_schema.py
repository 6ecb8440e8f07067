"""The JSON Schema of the spec format, and key look-ups in it for "Did you mean …?" hints.

A spec with ``extends:`` is validated after its base is merged in, so on its own it may leave
out any key, at any depth, that the base supplies. The schema says the same: a spec without
``extends`` must match ``$defs/Spec`` (every required key), one with it ``$defs/PartialSpec``,
a copy of every definition with no ``required`` keys (and ``anyOf`` for tagged unions, whose
``type:`` may come from the base).
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from envbuilder.spec._models import Spec

SCHEMA_ID = "https://envbuilder.dev/schema/spec.json"


@functools.cache
def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a spec file, with a description for every key."""
    spec = Spec.model_json_schema(mode="validation")
    defs: dict[str, Any] = spec.pop("$defs", {})
    defs["Spec"] = spec
    for model in defs.values():
        _describe_tag(model)
    defs.update({f"Partial{name}": _partial(model) for name, model in list(defs.items())})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": spec["title"],
        "description": spec["description"],
        "type": "object",
        "if": {"required": ["extends"]},
        "then": {"$ref": "#/$defs/PartialSpec"},
        "else": {"$ref": "#/$defs/Spec"},
        "$defs": dict(sorted(defs.items())),
    }


def _partial(node: Any) -> Any:
    """``node`` with nothing required: no ``required`` lists, tagged unions as ``anyOf``, and
    references to the partial copies."""
    if isinstance(node, list):
        return [_partial(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("required", "discriminator"):
            continue
        if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
            out[key] = "#/$defs/Partial" + value.removeprefix("#/$defs/")
        elif key == "oneOf":
            out["anyOf"] = _partial(value)
        elif key == "properties":  # property names are not keywords
            out[key] = {name: _partial(prop) for name, prop in value.items()}
        else:
            out[key] = _partial(copy.deepcopy(value))
    return out


def _describe_tag(model: dict[str, Any]) -> None:
    """Describe the `type:` key of a plugin block (its Config's `type` is a bare Literal)."""
    tag = model.get("properties", {}).get("type")
    if not isinstance(tag, dict) or "description" in tag or "const" not in tag:
        return
    summary = str(model.get("description", "")).strip().split("\n")[0]
    tag["description"] = f"`{tag['const']}`: {summary}" if summary else f"Always `{tag['const']}`."


def keys_at(loc: tuple[Any, ...], data: Any) -> list[str]:
    """The keys the schema allows in the mapping at ``loc`` of ``data``."""
    node = _node_at(loc, data)
    return sorted(node.get("properties", {})) if node else []


def homes_of(key: str, loc: tuple[Any, ...], data: Any) -> list[tuple[Any, ...]]:
    """The other mappings of ``data`` where the schema allows ``key`` (a key indented at the
    wrong level, found at ``loc``), nearest the top first (``[("grader",)]`` for a top-level
    ``target``); with none, the top-level blocks the spec does not have that allow it."""
    homes: list[tuple[Any, ...]] = []
    queue: list[tuple[tuple[Any, ...], Any]] = [((), data)]
    while queue:  # breadth first: the nearest home first
        here, value = queue.pop(0)
        if isinstance(value, dict):
            if here != loc[:-1] and key not in value and key in keys_at(here, data):
                homes.append(here)
            children: list[tuple[str | int, Any]] = [(k, v) for k, v in value.items() if isinstance(k, str)]
        elif isinstance(value, list):
            children = list(enumerate(value))
        else:
            continue
        queue += [((*here, k), v) for k, v in children if (*here, k) != loc]
    return homes


def blocks_with(key: str, data: Any) -> list[tuple[Any, ...]]:
    """The top-level blocks ``data`` does not have whose schema allows ``key`` (a union's
    members aside: a block whose `type:` is not known yet)."""
    homes: list[tuple[Any, ...]] = []
    top = json_schema()["$defs"]["Spec"].get("properties", {})
    defs = json_schema()["$defs"]
    for name in sorted(top):
        if isinstance(data, dict) and name in data:
            continue
        node = _resolve(top[name], defs, None)
        if node is not None and key in node.get("properties", {}):
            homes.append((name,))
    return homes


def description_at(loc: tuple[Any, ...], data: Any) -> str | None:
    """The schema's description of the key at ``loc`` of ``data`` (None when unknown)."""
    if not loc:
        return None
    parent = _node_at(loc[:-1], data)
    if parent is None:
        return None
    prop = parent.get("properties", {}).get(loc[-1])
    if not isinstance(prop, dict):
        return None
    return prop.get("description")


def _node_at(loc: tuple[Any, ...], data: Any) -> dict[str, Any] | None:
    """The schema of the value at ``loc`` (resolved to one object schema when it is a union)."""
    defs = json_schema()["$defs"]
    node: dict[str, Any] | None = defs["Spec"]
    value = data
    for part in loc:
        node = _resolve(node, defs, value)
        if node is None:
            return None
        if isinstance(part, int):
            node = node.get("items")
        elif part in node.get("properties", {}):
            node = node["properties"][part]
        else:
            node = node.get("additionalProperties")
            if not isinstance(node, dict):
                return None
        value = (
            value.get(part)
            if isinstance(value, dict)
            else (
                value[part]
                if isinstance(value, list) and isinstance(part, int) and part < len(value)
                else None
            )
        )
    return _resolve(node, defs, value)


def _resolve(node: dict[str, Any] | None, defs: dict[str, Any], value: Any) -> dict[str, Any] | None:
    """Follow ``$ref``s and pick the union member that matches ``value``'s ``type:``."""
    for _ in range(20):
        if node is None:
            return None
        if "$ref" in node:
            node = defs.get(node["$ref"].rsplit("/", 1)[-1])
            continue
        options = node.get("oneOf") or node.get("anyOf")
        if options:
            mapping = node.get("discriminator", {}).get("mapping", {})
            tag = value.get("type") if isinstance(value, dict) else None
            if tag in mapping:
                node = defs.get(mapping[tag].rsplit("/", 1)[-1])
                continue
            objects = [o for o in options if o.get("type") == "object" or "$ref" in o]
            node = objects[0] if len(objects) == 1 else None
            continue
        return node
    return None
