"""Image fields in any shape the data layer hands over become image blocks with a sniffed type."""

from __future__ import annotations

import base64
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from envbuilder.errors import DataError
from envbuilder.prompting import image_blocks, sniff_mime
from tests.conftest import ENVS

PNG = (
    pq.read_table(ENVS / "data/digits/test-00000-of-00001.parquet", columns=["image"])
    .column("image")[0]
    .as_py()["bytes"]
)
B64 = base64.b64encode(PNG).decode()


@pytest.mark.parametrize(
    ("head", "mime"),
    [
        (PNG[:16], "image/png"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "image/jpeg"),
        (b"GIF89a\x01\x00", "image/gif"),
        (b"RIFF\x10\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"BM\x00\x00", "image/bmp"),
        (b"II*\x00\x08\x00", "image/tiff"),
        (b"%PDF-1.7", None),
    ],
)
def test_sniff(head: bytes, mime: str | None) -> None:
    assert sniff_mime(head) == mime


@pytest.mark.parametrize(
    "value",
    [
        {"bytes": PNG, "path": "0.png"},  # HF image struct, raw bytes (the data layer today)
        {"bytes": B64, "path": None},  # HF image struct, base64 (after the data layer's rewrite)
        PNG,
        bytearray(PNG),
        B64,
        f"data:image/png;base64,{B64}",
        {"data": B64, "mimeType": "image/jpeg"},  # an ORS block: the type is sniffed, not trusted
    ],
)
def test_every_shape_becomes_a_png_block(value: object) -> None:
    [block] = image_blocks(value, base_dir=None, where="image")
    assert (block.mimeType, block.data) == ("image/png", B64)


def test_lists_and_nulls() -> None:
    assert image_blocks(None, base_dir=None, where="image") == []
    assert len(image_blocks([PNG, None, B64], base_dir=None, where="image")) == 2


def test_path_only_struct_reads_inside_the_spec_folder(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    (tmp_path / "img/0.png").write_bytes(PNG)
    [block] = image_blocks({"bytes": None, "path": "img/0.png"}, base_dir=tmp_path, where="image")
    assert block.data == B64
    with pytest.raises(DataError) as info:
        image_blocks({"bytes": None, "path": "../outside.png"}, base_dir=tmp_path / "img", where="image")
    assert info.value.message == "image: the image path '../outside.png' is outside the spec's folder"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"%PDF-1.7 ...", "photo: the bytes are not a recognised image (they start with b'%PDF-1.7')"),
        ("not base64!", "photo: the string is not base64 (it starts with 'not base64!')"),
        (42, "photo: expected an image, got a int"),
        ({"bytes": None, "path": None}, "photo: the image struct has neither `bytes` nor `path`"),
        ([PNG, b"GIF8"], "photo[1]: the bytes are not a recognised image (they start with b'GIF8')"),
    ],
)
def test_bad_images_are_data_errors(value: object, message: str) -> None:
    with pytest.raises(DataError) as info:
        image_blocks(value, base_dir=None, where="photo")
    assert (info.value.code, info.value.message) == ("image_invalid", message)
