"""Split filters: a sandboxed Jinja expression over each row, computed once and cached on disk.

The rows a filter keeps are stored as little-endian int64 row numbers under
``$ENVBUILDER_CACHE_DIR/filters/<key>.idx`` and memory-mapped on later starts. The key hashes
the identity of the split's data files (path, size, mtime), the expression and the format
version (see ``_cache``), so editing the data or the expression recomputes it; tables that are
not file-backed are filtered in memory on every start.
"""

from __future__ import annotations

import logging
import mmap
import sys
import time
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta

from envbuilder.data._base import Table
from envbuilder.data._cache import atomic_write, build_lock, cache_key, cache_path
from envbuilder.data._convert import needs_conversion, to_json
from envbuilder.errors import DataError, TemplateError, name_hint
from envbuilder.templating import jinja_env

log = logging.getLogger("envbuilder.data")

CHUNK = 8192
#: The most rows a filter reads from a table that is not file-backed (a generated table) on
#: every start: its result cannot be cached, and a 10⁹-row table would never open.
MAX_UNCACHED = 1_000_000


class RowFilter:
    """A compiled filter expression, e.g. ``level >= 3 and subject == 'algebra'``."""

    def __init__(self, expression: str, key: str):
        self.expression, self.key = expression, key
        env = jinja_env(None)
        try:
            self._fn = env.compile_expression(expression, undefined_to_none=False)
            ast = env.parse("{{ " + expression + " }}")
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"filter syntax error: {exc.message}", code="filter_syntax") from None
        self.variables = frozenset(jinja2.meta.find_undeclared_variables(ast))

    def check_columns(self, columns: list[str]) -> None:
        missing = sorted(self.variables - set(columns) - set(jinja_env(None).globals))
        if missing:
            raise DataError(
                f"the filter uses {missing[0]!r}, which the rows lack",
                hint=name_hint(missing[0], columns, "Row columns"),
                code="filter_unknown_column",
            )

    def keep(self, row: dict[str, Any]) -> bool:
        try:
            return bool(self._fn(**row))
        except Exception as exc:  # the expression is user code: any failure is a data error
            raise DataError(
                f"the filter failed on a row: {type(exc).__name__}: {exc}",
                hint="Check the expression against the row's column types",
                code="filter_failed",
            ) from None


def filter_rows(table: Table, flt: RowFilter) -> Sequence[int]:
    """Row numbers of ``table`` that ``flt`` keeps, from the cache when the data is unchanged."""
    flt.check_columns(table.columns)
    if table.identity() is None and len(table) > MAX_UNCACHED:
        raise DataError(
            f"a filter reads every row, and this table has {len(table):,} rows that are not in a file",
            hint=f"Filter at most {MAX_UNCACHED:,} generated rows (lower `num_tasks`), or pick a level "
            "with `source:` instead of filtering",
            code="filter_too_large",
        )
    identity = table.identity()
    path = cache_path("filters", cache_key("filter", identity, flt.expression), ".idx") if identity else None
    if path is None:
        return _filter(table, flt, None)
    if path.exists():
        return _load(path)
    with build_lock(path):  # the other workers of this host wait, then read it
        if path.exists():
            return _load(path)
        return _filter(table, flt, path)


def filter_profiled(
    table: Table, index: Sequence[int] | Any, profile: dict[int, dict[str, Any]], flt: RowFilter
) -> Sequence[int]:
    """Positions of ``index`` (the profiled rows of ``table``) that ``flt`` keeps, the filter
    seeing each row's columns and its profile (``pass_rate``, ``mean_reward``, …)."""
    from envbuilder.data._profile import PROFILE_FIELDS

    flt.check_columns([*table.columns, *PROFILE_FIELDS])
    kept = array("q")
    for i in range(len(index)):
        row = table.row(index[i])
        if flt.keep({**(to_json(row) if needs_conversion(row) else row), **profile[index[i]]}):
            kept.append(i)
    return kept


def _filter(table: Table, flt: RowFilter, path: Path | None) -> Sequence[int]:
    started = time.monotonic()
    kept = array("q")
    n = len(table)
    for lo in range(0, n, CHUNK):
        for k, row in enumerate(table.rows(lo, min(n, lo + CHUNK))):
            if flt.keep(to_json(row) if needs_conversion(row) else row):
                kept.append(lo + k)
    if n > 100_000:
        log.info(
            "filter %r kept %s of %s rows in %.1f s",
            flt.expression,
            f"{len(kept):,}",
            f"{n:,}",
            time.monotonic() - started,
        )
    if path is not None:
        with atomic_write(path) as tmp, open(tmp, "wb") as f:
            (kept if sys.byteorder == "little" else _swapped(kept)).tofile(f)
    return kept


def _swapped(a: array) -> array:
    b = array("q", a)
    b.byteswap()
    return b


def _load(path: Path) -> Sequence[int]:
    size = path.stat().st_size
    if size == 0:
        return array("q")
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mm).cast("q")
    if sys.byteorder != "little":
        return _swapped(array("q", view))
    return view
