"""An episode's world: a JSON document shared by every session, and each session's changes to it.

A spec's ``state:`` names an initial document (a JSON file beside the spec, a task field, or
both: the task's field is a merge patch applied to the file). A τ²-retail database is 2.8 MB;
copying it per session would make sessions too big for a shared store and too slow to
serialise, so a session keeps only its **changes** (:class:`Changes`, plain JSON) and every
call works on a :class:`World` view over the shared, never-mutated document:

* The document's top-level values that are objects are *collections* (``users``, ``orders``);
  their items are copied on first access within a call (a fast JSON copy), so a tool mutates
  its copy freely and the shared document is never touched. Other top-level values are copied
  whole on access.
* After the call, :meth:`World.commit` keeps the items that differ from the document (and the
  deleted keys) as the session's changes; an item changed back to its original is dropped.

So a session's size grows with what its tools changed, not with the database, and any worker
or replica rebuilds the same state from the document and the changes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import orjson

from envbuilder.errors import EnvbuilderError, ToolError

__all__ = [
    "MISSING",
    "Changes",
    "Collection",
    "Document",
    "World",
    "changed_paths",
    "json_copy",
    "merge_patch",
]

Changes = dict[str, Any]
"""A session's changes: ``{"items": {top: {key: value}}, "deleted": {top: [key, ...]},
"values": {top: value}}`` (empty sections are left out)."""


def json_copy(value: Any) -> Any:
    """A deep copy of plain JSON (dicts, lists, scalars), through orjson: an order of the retail
    database copies in a few microseconds (``deepcopy`` takes about 100)."""
    if type(value) is not dict and type(value) is not list:
        return value
    try:
        return orjson.loads(orjson.dumps(value))
    except TypeError:  # not plain JSON (a big int, a non-string key): copy it by hand
        return _copy(value)


def _copy(value: Any) -> Any:
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy(v) for v in value]
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with the JSON merge patch ``patch`` applied (RFC 7386): objects merge key by
    key, ``null`` removes a key, anything else replaces. ``target`` is not modified."""
    if not isinstance(patch, dict):
        return json_copy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class Document:
    """The initial document of a spec's ``state:``: loaded once, shared, never mutated."""

    def __init__(self, data: Mapping[str, Any], patch_field: str | None = None):
        self.data: dict[str, Any] = dict(data)
        self.patch_field = patch_field
        """The task field holding a merge patch of the document (``state.field``), if any."""

    @classmethod
    def load(cls, path: Path | None, patch_field: str | None = None) -> Document:
        """The document in the JSON file ``path`` (an empty one without a file)."""
        if path is None:
            return cls({}, patch_field)
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise EnvbuilderError(
                f"cannot read the state file {path.name}: {exc}",
                hint="Give a JSON file beside the spec",
                code="state_file",
            ) from None
        if not isinstance(data, dict):
            raise EnvbuilderError(
                f"the state file {path.name} must hold a JSON object, not {type(data).__name__}",
                hint="The state is one JSON object (its top-level keys are collections)",
                code="state_file",
            )
        return cls(data, patch_field)

    def initial(self, task: Mapping[str, Any]) -> Changes:
        """The changes a fresh episode on ``task`` starts with: the task's patch, if any."""
        if self.patch_field is None:
            return {}
        patch = task.get(self.patch_field)
        if isinstance(patch, str) and patch.strip():
            try:
                patch = json.loads(patch)
            except ValueError:
                raise ToolError(f"the task's {self.patch_field!r} is not JSON") from None
        if not patch:
            return {}
        if not isinstance(patch, dict):
            raise ToolError(f"the task's {self.patch_field!r} must be a JSON object (a merge patch)")
        state = World(self, {})
        for key, value in patch.items():
            current = self.data.get(key)
            if isinstance(current, dict) and isinstance(value, dict):
                collection = state[key]
                for item, change in value.items():
                    if change is None:
                        collection.pop(item, None)
                    else:
                        collection[item] = merge_patch(collection.get(item), change)
            elif value is None:
                state.pop(key, None)
            else:
                state[key] = merge_patch(current, value)
        return state.commit()

    def state(self, changes: Changes) -> World:
        return World(self, changes)


class Collection(MutableMapping[str, Any]):
    """A top-level object of the document, with this session's changes; items are copied on
    first access, so mutating one never touches the shared document."""

    def __init__(self, base: dict[str, Any], items: dict[str, Any], deleted: list[str]):
        self._base = base
        self._items = items
        self._deleted = set(deleted)
        self.opened: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key in self.opened:
            return self.opened[key]
        if key in self._items:
            value = json_copy(self._items[key])
        elif key in self._base and key not in self._deleted:
            value = json_copy(self._base[key])
        else:
            raise KeyError(key)
        self.opened[key] = value
        return value

    def peek(self, key: str, default: Any = None) -> Any:
        """The item ``key`` without copying it, for searches: read it, never change it."""
        if key in self.opened:
            return self.opened[key]
        if key in self._items:
            return self._items[key]
        if key in self._base and key not in self._deleted:
            return self._base[key]
        return default

    def __setitem__(self, key: str, value: Any) -> None:
        self._deleted.discard(key)
        self.opened[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self.opened.pop(key, None)
        self._items.pop(key, None)
        if key in self._base:
            self._deleted.add(key)

    def __contains__(self, key: object) -> bool:
        return key in self.opened or key in self._items or (key in self._base and key not in self._deleted)

    def __iter__(self) -> Iterator[str]:
        for key in self._base:
            if key not in self._deleted:
                yield key
        for key in list(self._items) + list(self.opened):
            if key not in self._base and key in self:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def commit(self) -> tuple[dict[str, Any], list[str]]:
        """The collection's changes: items that differ from the document, deleted keys."""
        items = dict(self._items)
        for key, value in self.opened.items():
            if key in self._base and self._base[key] == value:
                items.pop(key, None)
            else:
                items[key] = value
        return items, sorted(k for k in self._deleted if k in self._base)


class World(MutableMapping[str, Any]):
    """What a stateful tool reads and changes: the document as one session sees it.

    Use it like the JSON document it stands for (``state["orders"]["#W1"]["status"]``);
    :meth:`commit` returns the session's changes after the call.
    """

    def __init__(self, document: Document, changes: Changes):
        self._document = document
        self._items: dict[str, Any] = changes.get("items", {})
        self._deleted: dict[str, list[str]] = changes.get("deleted", {})
        self._values: dict[str, Any] = dict(changes.get("values", {}))
        self._open: dict[str, Any] = {}

    def _base(self, key: str) -> Any:
        return self._document.data.get(key)

    def __getitem__(self, key: str) -> Any:
        if key in self._open:
            return self._open[key]
        base = self._base(key)
        if key in self._values:
            if self._values[key] == _REMOVED:
                raise KeyError(key)
            value = json_copy(self._values[key])
        elif isinstance(base, dict):
            value = Collection(base, dict(self._items.get(key, {})), self._deleted.get(key, []))
        elif key in self._document.data:
            value = json_copy(base)
        else:
            raise KeyError(key)
        self._open[key] = value
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        self._open[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self._open[key] = _REMOVED_MARK

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        if key in self._open:
            return self._open[key] is not _REMOVED_MARK
        if key in self._values:
            return self._values[key] != _REMOVED
        return key in self._document.data

    def __iter__(self) -> Iterator[str]:
        keys = dict.fromkeys([*self._document.data, *self._values, *self._open])
        return (k for k in keys if k in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def commit(self) -> Changes:
        """The session's changes after this call (plain JSON, only what differs)."""
        items, deleted = dict(self._items), dict(self._deleted)
        values = dict(self._values)
        for key, value in self._open.items():
            base = self._base(key)
            if isinstance(value, Collection) and isinstance(base, dict):
                values.pop(key, None)
                changed, gone = value.commit()
                _put(items, key, changed)
                _put(deleted, key, gone)
            elif value is _REMOVED_MARK:
                items.pop(key, None)
                deleted.pop(key, None)
                if key in self._document.data:
                    values[key] = _REMOVED
                else:
                    values.pop(key, None)
            else:
                if isinstance(value, Collection):
                    value = dict(value.items())
                items.pop(key, None)
                deleted.pop(key, None)
                if key in self._document.data and value == base:
                    values.pop(key, None)
                else:
                    values[key] = value
        out: Changes = {}
        for name, section in (("items", items), ("deleted", deleted), ("values", values)):
            if section:
                out[name] = section
        return out

    def value(self, key: str) -> Any:
        """A plain copy of the top-level value ``key`` (a collection as a dict)."""
        value = self[key]
        return dict(value.items()) if isinstance(value, Collection) else value


_REMOVED = {"$removed": True}
"""How a removed top-level key is stored in the changes (plain JSON)."""
_REMOVED_MARK: Any = object()


def _put(section: dict[str, Any], key: str, value: Any) -> None:
    if value:
        section[key] = value
    else:
        section.pop(key, None)


def changed_paths(document: Document, *changes: Changes) -> dict[tuple[str, ...], list[Any]]:
    """Every (top, item) or (top,) key that any of ``changes`` touches, with its value in each
    (``MISSING`` where it does not exist): what comparing two sessions' states needs to look at."""
    keys: dict[tuple[str, ...], None] = {}
    for change in changes:
        for top, items in change.get("items", {}).items():
            keys.update(dict.fromkeys((top, k) for k in items))
        for top, gone in change.get("deleted", {}).items():
            keys.update(dict.fromkeys((top, k) for k in gone))
        keys.update(dict.fromkeys((top,) for top in change.get("values", {})))
    out: dict[tuple[str, ...], list[Any]] = {}
    for key in keys:
        out[key] = [_lookup(document, change, key) for change in changes]
    return out


MISSING: Any = type("Missing", (), {"__repr__": lambda self: "<missing>"})()
"""A key that does not exist in one of the states compared."""


def _lookup(document: Document, changes: Changes, key: tuple[str, ...]) -> Any:
    top = key[0]
    values = changes.get("values", {})
    if top in values:
        value = values[top]
        if value == _REMOVED:
            return MISSING
        if len(key) == 1:
            return value
        return value.get(key[1], MISSING) if isinstance(value, dict) else MISSING
    if len(key) == 1:
        return document.data.get(top, MISSING)
    if key[1] in changes.get("deleted", {}).get(top, ()):
        return MISSING
    items = changes.get("items", {}).get(top, {})
    if key[1] in items:
        return items[key[1]]
    base = document.data.get(top)
    return base.get(key[1], MISSING) if isinstance(base, dict) else MISSING
