"""Which text encoding files are in: the first byte that is not valid text, and the legacy
encoding a spreadsheet export most likely used. No pyarrow here: `init` and the error messages of
the text sources use it without loading a table library."""

from __future__ import annotations

import codecs
from pathlib import Path


def first_undecodable(path: Path, encoding: str) -> tuple[int, int] | None:
    """The offset and value of the first byte of ``path`` that is not valid ``encoding`` text."""
    decoder = codecs.getincrementaldecoder(encoding)()
    offset = 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                at = max(0, offset + exc.start - len(exc.object) + len(chunk))
                return at, exc.object[exc.start]
            if not chunk:
                return None
            offset += len(chunk)


def detect_encoding(paths: list[Path]) -> str | None:
    """None when every file is UTF-8 text; else the legacy encoding they all read as: Windows-1252
    (what spreadsheet programs export), else Latin-1 (which reads any bytes)."""
    if all(first_undecodable(p, "utf-8") is None for p in paths):
        return None
    return "cp1252" if all(first_undecodable(p, "cp1252") is None for p in paths) else "latin-1"
