"""Index maps: which source row is task ``i`` of a split (slices, filters, carve-outs, shuffles).

A map never copies rows; most never hold more than a few numbers. Filters and carve-outs hold
the selected row numbers (an ``array('q')`` or a memory-mapped cache file), and a seeded shuffle
is a keyed pseudo-random permutation (a Feistel network with cycle walking) computed per index,
so shuffling ten million rows costs no memory and no start-up time.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from typing import Protocol

from envbuilder.spec import parse_slice

__all__ = [
    "Complement",
    "Gather",
    "Identity",
    "IndexMap",
    "Permutation",
    "Window",
    "position",
    "runs",
    "slice_bounds",
]


class IndexMap(Protocol):
    def __len__(self) -> int: ...

    def __getitem__(self, i: int) -> int:
        """The source row of position ``i`` (0 <= i < len)."""
        ...


class Identity:
    """The identity map over a table of ``n`` rows."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


class Window:
    """Positions ``start:stop`` of ``base`` (a slice or a limit)."""

    def __init__(self, base: IndexMap, start: int, stop: int):
        self.base, self.start, self.n = base, start, max(0, stop - start)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return self.base[self.start + i]


class Gather:
    """The ``positions`` of ``base`` (sorted for filters and carve-outs)."""

    def __init__(self, base: IndexMap, positions: Sequence[int]):
        self.base, self.positions = base, positions

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, i: int) -> int:
        return self.base[self.positions[i]]


class Complement:
    """The positions of ``base`` that are *not* in the sorted ``excluded`` (what a carve-out leaves)."""

    def __init__(self, base: IndexMap, excluded: Sequence[int]):
        self.base, self.excluded = base, excluded
        # excluded[j] - j = how many kept positions precede excluded[j]: non-decreasing.
        self._keys = _Shifted(excluded)

    def __len__(self) -> int:
        return len(self.base) - len(self.excluded)

    def __getitem__(self, i: int) -> int:
        return self.base[i + bisect.bisect_right(self._keys, i)]


class _Shifted(Sequence[int]):
    def __init__(self, seq: Sequence[int]):
        self.seq = seq

    def __len__(self) -> int:
        return len(self.seq)

    def __getitem__(self, j):
        return self.seq[j] - j


class Permutation:
    """A seeded pseudo-random permutation of ``base``: O(1) memory, a few microseconds per index."""

    ROUNDS = 6

    def __init__(self, base: IndexMap, seed: int):
        self.base, self.n = base, len(base)
        bits = max(2, (max(1, self.n - 1)).bit_length())
        self.half = (bits + 1) // 2
        self.mask = (1 << self.half) - 1
        self.keys = [
            hashlib.blake2b(f"{seed}:{r}".encode(), digest_size=8).digest() for r in range(self.ROUNDS)
        ]

    def __len__(self) -> int:
        return self.n

    def _round(self, r: int, x: int) -> int:
        h = hashlib.blake2b(x.to_bytes(8, "little"), digest_size=8, key=self.keys[r]).digest()
        return int.from_bytes(h, "little") & self.mask

    def _encrypt(self, x: int) -> int:
        left, right = x >> self.half, x & self.mask
        for r in range(self.ROUNDS):
            left, right = right, left ^ self._round(r, right)
        return (left << self.half) | right

    def __getitem__(self, i: int) -> int:
        x = self._encrypt(i)
        while x >= self.n:  # cycle walking: the domain is < 4n, so this ends fast
            x = self._encrypt(x)
        return self.base[x]


def position(index: IndexMap, row: int) -> int | None:
    """The position of source row ``row`` in ``index`` when it is a plain range of rows (the
    identity, a slice or limit of it), None when it is not there or the map is another kind."""
    if isinstance(index, Identity):
        return row if 0 <= row < len(index) else None
    if isinstance(index, Window):
        inner = position(index.base, row)
        if inner is None:
            return None
        at = inner - index.start
        return at if 0 <= at < len(index) else None
    return None


def runs(index: IndexMap, lo: int, hi: int) -> list[tuple[int, int]]:
    """Source rows of positions ``lo:hi``, in order, grouped into contiguous runs ``(start, stop)``:
    each run is one contiguous read."""
    out: list[tuple[int, int]] = []
    start = prev = -2
    for i in range(lo, hi):
        s = index[i]
        if s == prev + 1:
            prev = s
            continue
        if start >= 0:
            out.append((start, prev + 1))
        start = prev = s
    if start >= 0:
        out.append((start, prev + 1))
    return out


def slice_bounds(text: str, n: int) -> tuple[int, int]:
    """``[start:stop]`` resolved against ``n`` rows, clamped like a Python slice."""
    a, b = parse_slice(text)

    def resolve(bound: str | None, default: int) -> int:
        if bound is None:
            return default
        if bound.endswith("%"):
            return int(n * float(bound[:-1]) // 100)
        return int(bound)

    start, stop, _ = slice(resolve(a, 0), resolve(b, n)).indices(n)
    return start, max(start, stop)
