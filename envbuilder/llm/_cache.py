"""A persistent, content-addressed cache of model replies (one SQLite file): the judge's verdicts
and the simulated user's turns.

The key is a hash of everything that decides a reply (endpoint, model, sampling parameters,
rendered messages, the tools offered), so grading the same answer twice costs one judge call,
across runs, and a change to any of them is a new request. What the key cannot see is the
endpoint's own behaviour: a different model served under the same name and URL (a scripted
test server whose script changed) is answered from the cache until it is cleared
(``envbuilder cache clear``) or bypassed (``--no-cache``, ``ENVBUILDER_REPLY_CACHE=off``).
(The file keeps the name it had when only the judge used it, so existing caches stay valid.)
The folder is ``$ENVBUILDER_CACHE_DIR`` (default ``~/.cache/envbuilder``). A cache that
cannot be opened or written is logged once and skipped: it never fails a grade.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from envbuilder.paths import cache_dir

__all__ = ["FILE_NAME", "ReplyCache", "cache_key", "open_cache"]

log = logging.getLogger("envbuilder.llm")

FILE_NAME = "judge-cache.sqlite3"


def cache_key(request: dict[str, Any]) -> str:
    """The sha256 of ``request`` as canonical JSON."""
    blob = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


class ReplyCache:
    """Reply text by key; blocking SQLite work runs in a worker thread."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._broken = False

    def _connect(self) -> sqlite3.Connection | None:
        if self._conn is None and not self._broken:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, check_same_thread=False, timeout=5)
                conn.execute("PRAGMA journal_mode=WAL")
                # No fsync per commit (WAL keeps the file consistent; a crash may lose the
                # last replies, which only costs re-asking): commits take microseconds.
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL, "
                    "created REAL NOT NULL)"
                )
                conn.commit()
                self._conn = conn
            except (OSError, sqlite3.Error) as exc:
                self._broken = True
                log.warning("reply cache disabled: cannot open %s (%s)", self.path, type(exc).__name__)
        return self._conn

    def get_sync(self, key: str) -> str | None:
        with self._lock:
            conn = self._connect()
            if conn is None:
                return None
            try:
                row = conn.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
            except sqlite3.Error:
                return None
        return None if row is None else str(row[0])

    def put_sync(self, key: str, reply: str) -> None:
        with self._lock:
            conn = self._connect()
            if conn is None:
                return
            try:
                conn.execute(
                    "INSERT OR REPLACE INTO replies (key, reply, created) VALUES (?, ?, ?)",
                    (key, reply, time.time()),
                )
                conn.commit()
            except sqlite3.Error as exc:
                log.warning("reply cache write failed (%s)", type(exc).__name__)

    def count(self) -> int:
        """How many replies it holds (0 when it cannot be opened)."""
        with self._lock:
            conn = self._connect()
            if conn is None:
                return 0
            try:
                return int(conn.execute("SELECT COUNT(*) FROM replies").fetchone()[0])
            except sqlite3.Error:
                return 0

    def clear(self) -> int:
        """Delete every reply; how many there were."""
        with self._lock:
            conn = self._connect()
            if conn is None:
                return 0
            removed = conn.execute("DELETE FROM replies").rowcount
            conn.commit()
            conn.execute("VACUUM")
            return int(removed)

    async def get(self, key: str) -> str | None:
        return await asyncio.to_thread(self.get_sync, key)

    async def put(self, key: str, reply: str) -> None:
        await asyncio.to_thread(self.put_sync, key, reply)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


_caches: dict[Path, ReplyCache] = {}
_caches_lock = threading.Lock()


def open_cache(directory: Path | None = None) -> ReplyCache:
    """The process-wide cache for ``directory`` (default :func:`cache_dir`)."""
    path = (directory or cache_dir()) / FILE_NAME
    with _caches_lock:
        cache = _caches.get(path)
        if cache is None:
            cache = _caches[path] = ReplyCache(path)
        return cache
