"""A served task sent back to ``/create``: the row it names, found from the task itself.

A client's standard flow is ``env.session(task=env.get_task(split, i))``: the task a server
served, sent back unchanged as ``task_spec``. Any replica, any worker, any time later must
grade it against the stored row (private fields included), so the row is found from the task
alone, never from a record of what this process served:

* a default id ``<dataset split>-<row>`` of a split that serves its rows in order or a slice
  of them is resolved by arithmetic (:meth:`Environment.find_task`);
* any other id (a dataset's own id column, a mixture's ids, a carved or reordered split)
  through an index of the split's ids, built once per split and process on first need, off the
  event loop (a worker thread; one build at a time per split, the others wait for it). Splits
  of more than :data:`INDEX_LIMIT` tasks (generated ones run to a billion) are not indexed:
  their tasks come back by their default ids only.

The row found must also match the task's content: each of the row's public fields the client
sent back equals the row's (private fields and keys of the client's own are ignored: the stored
row is what is graded). A task whose id names no row, or whose public content differs from the
row's, is not a served task.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any

import orjson

from envbuilder.data import SplitView, Task
from envbuilder.environment import Environment
from envbuilder.errors import TaskNotFound

__all__ = ["served_row"]

INDEX_LIMIT = 2_000_000
"""The most tasks a split may have for its ids to be indexed (an index holds each id once)."""

_indexes: weakref.WeakKeyDictionary[SplitView, dict[str, int]] = weakref.WeakKeyDictionary()
_locks: weakref.WeakKeyDictionary[SplitView, threading.Lock] = weakref.WeakKeyDictionary()
_guard = threading.Lock()


def _id_index(view: SplitView) -> dict[str, int]:
    """``{str(id): position}`` for every task of ``view`` (the first position of an id)."""
    with _guard:
        found = _indexes.get(view)
        if found is not None:
            return found
        lock = _locks.setdefault(view, threading.Lock())
    with lock:
        found = _indexes.get(view)
        if found is None:
            found = {}
            position = 0
            for batch in view.iter_batches():
                for task in batch:
                    found.setdefault(str(task.get("id")), position)
                    position += 1
            with _guard:
                _indexes[view] = found
        return found


def _matches(env: Environment, row: Task, sent: dict[str, Any]) -> bool:
    """Whether each public field of the row that ``sent`` carries equals the row's as the
    client was shown it (JSON). Other keys, private fields above all, are the client's own
    and never used: the stored row is what is graded."""
    shown = orjson.loads(orjson.dumps(env.public(row), option=orjson.OPT_NON_STR_KEYS))
    return all(sent[key] == value for key, value in shown.items() if key in sent)


def _lookup(env: Environment, sent: dict[str, Any]) -> Task | None:
    task_id = sent.get("id")
    if not isinstance(task_id, str | int) or isinstance(task_id, bool):
        return None
    row = env.find_task(task_id)
    if row is not None and _matches(env, row, sent):
        return row
    key = str(task_id)
    for view in env.splits.values():
        if len(view) > INDEX_LIMIT:
            continue
        at = _id_index(view).get(key)
        if at is not None:
            row = view.task(at)
            if _matches(env, row, sent):
                return row
    return None


async def served_row(env: Environment, sent: Any, hint: tuple[str, int] | None = None) -> Task | None:
    """The stored row ``sent`` (a client's ``task_spec``) names, private fields included; None
    when it names none or its content differs. ``hint``: where this process served that id
    (a shortcut only, checked like any other candidate)."""
    if not isinstance(sent, dict):
        return None
    if hint is not None:
        try:
            row = env.split(hint[0]).task(hint[1])
        except TaskNotFound:  # a stale hint is only a missed shortcut
            row = None
        if row is not None and row.get("id") == sent.get("id") and _matches(env, row, sent):
            return row
    return await asyncio.to_thread(_lookup, env, sent)
