"""Which text encoding files are in: the one a byte-order mark declares, the first byte that is
not valid text, and the legacy encoding a spreadsheet export most likely used. No pyarrow here:
`init` and the error messages of the text sources use it without loading a table library."""

from __future__ import annotations

import codecs
from pathlib import Path

# UTF-32's marks first: UTF-32-LE's begins with UTF-16-LE's. Each codec named here reads the
# mark and drops it (utf-16-le would keep it as a U+FEFF at the start of the first value).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def bom_encoding(path: Path) -> str | None:
    """The encoding the byte-order mark at the start of ``path`` declares (None: no mark)."""
    with open(path, "rb") as f:
        head = f.read(4)
    return next((name for bom, name in _BOMS if head.startswith(bom)), None)


def text_encoding(path: Path, declared: str) -> str:
    """The encoding ``path`` is read in: its byte-order mark's, else ``declared``. A mark is the
    file saying what it is (Excel's "Unicode text" and `iconv -t UTF-16` write one), and its
    bytes are not text in any other encoding worth reading them in."""
    return bom_encoding(path) or declared


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
    """None when every file is UTF-8 text or begins with a byte-order mark (read in the encoding
    it declares, see :func:`text_encoding`); else the legacy encoding the other files all read as:
    Windows-1252 (what spreadsheet programs export), else Latin-1 (which reads any bytes)."""
    unmarked = [p for p in paths if bom_encoding(p) is None]
    if all(first_undecodable(p, "utf-8") is None for p in unmarked):
        return None
    return "cp1252" if all(first_undecodable(p, "cp1252") is None for p in unmarked) else "latin-1"
