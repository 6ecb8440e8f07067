"""Which warm containers an environment keeps, keyed by image *and* tree.

A session container is ready when it runs the task's image with the task's working folder in
place (the repository at its base commit, committed, owned by the agent) and the set-up done.
A warm container made for one image and one tree (a :class:`WarmKey`) is all of that ahead of
need, so a session of a task with that key takes it as a hand-over: no create, no start, no
upload, no exec on its path. A *blank* warm container (created and started, nothing put in)
serves any task of its image, at the price of the set-up on its path.

Which keys to keep warm is decided by demand (:class:`WarmPlan`): every ``/create`` tells the
plan its client and its task's key; the plan divides the environment's budget (``serve
--warm-containers``) between the clients that asked within :data:`HORIZON` seconds, in turns,
and each client's share between its most recent keys, in turns, so one client asking for a
hundred tasks does not take the warm containers another client's single task keeps. While no
client asked (a fresh server), the budget goes to the environment's default key: the spec's
image with its own working folder (no repository), or blank containers (a repository per task).
Memory is bounded: at most :data:`MAX_CLIENTS` clients and :data:`KEYS_PER_CLIENT` keys each,
with one task row per key.

A warm container is never handed to a second session (it leaves the pool when it is taken, and
the session's end removes it), and never holds another session's files: it is made fresh from
the image, never recycled.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

_Ask = tuple[Mapping[str, Any], float]  # a key's task, and when it was last asked for
HORIZON = 600.0
"""Seconds a client's ask keeps its key warm."""
MAX_CLIENTS = 64
"""Clients whose asks the plan remembers (the least recent are forgotten first)."""
KEYS_PER_CLIENT = 8
"""Keys each client's asks keep warm (its most recent ones)."""


@dataclass(frozen=True, order=True)
class WarmKey:
    """What a ready container holds: the image (``""``: the spec's own; else a task's build
    context) and the tree (``""``: the image's own working folder; else the repository at its
    commit, or a digest of the task's tarball)."""

    image: str = ""
    tree: str = ""
    blank: bool = False
    """Created and started only: nothing set up (serves any tree of the spec's image)."""
    limits: str = ""
    """The task's own CPU and memory limits (``""``: the spec's), which a container is made with."""

    @property
    def per_task(self) -> bool:
        """Whether making it needs a task (its image, its tree or its limits are the task's)."""
        return bool(self.image or self.tree or self.limits)


BLANK = WarmKey(blank=True)
"""A container of the spec's image created and started, nothing set up (serves any tree)."""


def tree_key(repository: Any, task: Mapping[str, Any]) -> str:
    """The key of the tree ``repository`` (a :class:`RepositorySpec` or None) puts in the
    working folder for ``task``: no git, no file read (cheap on every ``/create``)."""
    if repository is None:
        return ""
    if repository.tarball_field is not None:
        value = task.get(repository.tarball_field)
        data = value.encode() if isinstance(value, str) else bytes(value or b"")
        return "tar:" + hashlib.sha256(data).hexdigest()
    return f"git:{task.get(repository.field)}@{task.get(repository.commit_field)}"


class WarmPlan:
    """The keys clients asked for, and how many warm containers each should have."""

    def __init__(self, *, horizon: float = HORIZON):
        self.horizon = horizon
        # client -> (key -> (the task, last asked)), least recently asking client first
        self._asks: OrderedDict[Hashable, OrderedDict[WarmKey, _Ask]] = OrderedDict()
        self.hits = 0
        """Sessions whose container was a warm one made for their key."""
        self.misses = 0
        """Sessions that found none of their key (blank or cold)."""

    def ask(
        self, client: Hashable, key: WarmKey, task: Mapping[str, Any], *, now: float | None = None
    ) -> None:
        """A session of ``client`` for ``task`` (whose key is ``key``) was admitted."""
        now = time.monotonic() if now is None else now
        keys = self._asks.pop(client, None) or OrderedDict()
        keys.pop(key, None)
        keys[key] = (task, now)
        while len(keys) > KEYS_PER_CLIENT:
            keys.popitem(last=False)
        self._asks[client] = keys
        while len(self._asks) > MAX_CLIENTS:
            self._asks.popitem(last=False)

    def task(self, key: WarmKey) -> Mapping[str, Any] | None:
        """A task whose key is ``key`` (to build its image and tree), if a client asked for it."""
        for keys in self._asks.values():
            if key in keys:
                return keys[key][0]
        return None

    def targets(
        self, budget: int, default: WarmKey | None, *, now: float | None = None
    ) -> dict[WarmKey, int]:
        """How many warm containers each key should have, ``budget`` in all: one at a time to
        each client (most recent first) in turns, and within a client to its keys (most recent
        first) in turns; with a blank container first while clients ask (a task no one asked
        for yet starts from it). With no recent client: all to ``default`` (None: none)."""
        now = time.monotonic() if now is None else now
        self._forget(now)
        targets: dict[WarmKey, int] = {}
        if budget <= 0:
            return targets
        if not self._asks:
            return {default: budget} if default is not None else {}
        queues = [list(reversed(keys)) for keys in reversed(self._asks.values())]
        left = budget
        if default == BLANK and budget > 1:
            targets[BLANK] = 1
            left -= 1
        turn = 0
        while left > 0:
            for keys in queues:
                if left == 0:
                    break
                key = keys[turn % len(keys)]
                targets[key] = targets.get(key, 0) + 1
                left -= 1
            turn += 1
        return targets

    def _forget(self, now: float) -> None:
        for client in list(self._asks):
            keys = self._asks[client]
            for key in [k for k, (_, at) in keys.items() if now - at > self.horizon]:
                del keys[key]
            if not keys:
                del self._asks[client]

    def report(self) -> dict[str, Any]:
        return {"clients": len(self._asks), "hits": self.hits, "misses": self.misses}
