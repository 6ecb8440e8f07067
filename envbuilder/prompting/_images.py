"""Images in task data become ORS image blocks, whatever shape the data layer hands over.

Accepted values of an image field: the HuggingFace image struct ``{"bytes": ..., "path": ...}``
(``bytes`` raw or base64, or only a ``path`` inside the spec's folder), raw bytes, a base64
string, a ``data:image/...;base64,`` URL, an ORS image block ``{"data", "mimeType"}``, or a list
of these. ``None`` means "no image in this row". The MIME type is sniffed from the magic bytes,
never trusted from a file name.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envbuilder.errors import DataError
from envbuilder.paths import check_inside
from envbuilder.protocol import ImageBlock

__all__ = ["image_blocks", "sniff_mime"]

_MAGIC: list[tuple[bytes, str]] = [
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
]


def sniff_mime(head: bytes) -> str | None:
    """The image MIME type of bytes starting with ``head`` (None when not a known image)."""
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    return None


def _fail(where: str, message: str) -> DataError:
    return DataError(
        f"{where}: {message}",
        hint="An image field holds an HF image struct {bytes, path}, bytes, or a base64 string "
        "of a PNG, JPEG, GIF, WebP, BMP or TIFF image",
        code="image_invalid",
    )


def _from_bytes(raw: bytes, where: str, encoded: str | None = None) -> ImageBlock:
    mime = sniff_mime(raw[:16])
    if mime is None:
        raise _fail(where, f"the bytes are not a recognised image (they start with {raw[:8]!r})")
    data = encoded if encoded is not None else base64.b64encode(raw).decode("ascii")
    return ImageBlock(data=data, mimeType=mime)


def _from_base64(text: str, where: str) -> ImageBlock:
    if text.startswith("data:"):
        header, _, text = text.partition(",")
        if not header.endswith(";base64"):
            raise _fail(where, f"a data URL must be base64-encoded (got {header[:40]!r})")
    clean = "".join(text.split())
    try:
        raw = base64.b64decode(clean, validate=True)
    except (binascii.Error, ValueError):
        raise _fail(where, f"the string is not base64 (it starts with {text[:20]!r})") from None
    return _from_bytes(raw, where, encoded=clean)


def _from_path(path: str, base_dir: Path | None, where: str) -> ImageBlock:
    if base_dir is None:
        raise _fail(where, f"the image has only a path ({path!r}) and there is no spec folder")
    # The data is not trusted to name files: only files inside the spec's folder are read. A
    # link in that folder (a linked `data/` folder) is followed when its target lies inside a
    # folder the spec may read (paths.check_inside), as for the spec's own data files.
    named = Path(os.path.normpath(base_dir.absolute() / path))
    target = check_inside(named, base_dir) if named.is_relative_to(base_dir.absolute()) else None
    if target is None:
        raise _fail(where, f"the image path {path!r} is outside the spec's folder")
    try:
        raw = target.read_bytes()
    except OSError:
        raise _fail(where, f"the image file {path!r} cannot be read") from None
    return _from_bytes(raw, where)


def _one(value: Any, base_dir: Path | None, where: str) -> ImageBlock:
    if isinstance(value, bytes | bytearray | memoryview):
        return _from_bytes(bytes(value), where)
    if isinstance(value, str):
        return _from_base64(value, where)
    if isinstance(value, Mapping):
        if "data" in value and "mimeType" in value:  # already an ORS image block
            return _from_base64(str(value["data"]), where)
        data = value.get("bytes")
        if data is not None:
            return _one(data, base_dir, where)
        path = value.get("path")
        if isinstance(path, str) and path:
            return _from_path(path, base_dir, where)
        raise _fail(where, "the image struct has neither `bytes` nor `path`")
    raise _fail(where, f"expected an image, got a {type(value).__name__}")


def image_blocks(value: Any, *, base_dir: Path | None, where: str) -> list[ImageBlock]:
    """The image blocks of one field's ``value`` (``where`` names it in errors)."""
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [_one(v, base_dir, f"{where}[{i}]") for i, v in enumerate(value) if v is not None]
    return [_one(value, base_dir, where)]
