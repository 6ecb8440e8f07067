"""A hostile pack is refused before a byte is extracted, and a signature covers what is used."""

from __future__ import annotations

import hashlib
import json
import stat
import warnings
import zipfile
from pathlib import Path

import pytest

from envbuilder.catalog import TrustPolicy, pack, pull
from envbuilder.catalog._pack import LOCK_NAME, open_pack
from envbuilder.catalog._trust import SIGNATURE_SUFFIX, sign_lock
from envbuilder.errors import DataError
from tests.catalog.conftest import write_data
from tests.catalog.test_pull import SPEC, keys  # noqa: F401 (a fixture)


@pytest.fixture
def signed(tmp_path: Path, keys: dict[str, Path]) -> Path:  # noqa: F811
    """A pack of the squares spec, signed by the publisher beside it (``X.lock.json.sig``)."""
    folder = tmp_path / "src"
    write_data(folder)
    (folder / "squares.yaml").write_text(SPEC.format(version="1"))
    out = tmp_path / "site" / "squares.zip"
    out.parent.mkdir()
    pack(folder / "squares.yaml", out)
    with zipfile.ZipFile(out) as zf:
        lock = zf.read(LOCK_NAME)
    (out.parent / f"squares.lock.json{SIGNATURE_SUFFIX}").write_bytes(sign_lock(lock, keys["publisher"]))
    return out


def _rewrite(src: Path, dest: Path, extra: list[tuple[zipfile.ZipInfo | str, bytes]]) -> Path:
    """``src``'s entries, then ``extra`` ones, in a new zip at ``dest`` (signature copied)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info, zin.read(info))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Duplicate name": the very attack
            for name, data in extra:
                zout.writestr(name, data)
    sig = src.parent / f"{src.stem}.lock.json{SIGNATURE_SUFFIX}"
    (dest.parent / f"{dest.stem}.lock.json{SIGNATURE_SUFFIX}").write_bytes(sig.read_bytes())
    return dest


def _policy(keys: dict[str, Path]) -> TrustPolicy:  # noqa: F811
    return TrustPolicy(keys["publisher.pub"], require_signature=True)


def test_a_signed_pack_still_verifies(signed: Path, keys: dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    (pulled,) = pull(str(signed), cache_dir=tmp_path / "cache", trust=_policy(keys))
    assert pulled.name == "squares"


def test_a_second_lock_entry_cannot_replace_the_signed_one(
    signed: Path,
    keys: dict[str, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    # The attacker's spec grades every answer correct, with a lock that hashes it.
    with zipfile.ZipFile(signed) as zf:
        lock = json.loads(zf.read(LOCK_NAME))
    evil_spec = SPEC.format(version="1").replace("{{ square }}", "{{ n }}").encode()
    lock["files"]["squares.yaml"] = hashlib.sha256(evil_spec).hexdigest()
    forged = json.dumps(lock).encode()
    tampered = _rewrite(
        signed,
        tmp_path / "site" / "tampered.zip",
        [("./squares.yaml", evil_spec), ("./" + LOCK_NAME, forged)],
    )
    with pytest.raises(DataError) as err:
        pull(str(tampered), cache_dir=tmp_path / "cache", trust=_policy(keys))
    assert err.value.code == "pack_invalid"
    assert not list((tmp_path / "cache").rglob("squares.yaml"))  # nothing was extracted


def test_the_extracted_lock_must_be_the_signed_bytes(signed: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(signed) as zf:
        lock = zf.read(LOCK_NAME)
    open_pack(signed, cache_dir=tmp_path / "cache", lock=lock)
    with pytest.raises(DataError) as err:
        open_pack(signed, cache_dir=tmp_path / "cache", lock=lock + b" ")
    assert err.value.code == "pack_mismatch" and "not the lock that was signed" in err.value.message


def _link(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("data/squares.parquet", "twice"),
        ("DATA/Squares.parquet", "twice"),
        ("data//x", "unsafe path"),
        ("data/./x", "unsafe path"),
        ("../outside.txt", "unsafe path"),
        ("/etc/cron.d/x", "unsafe path"),
        ("data\\..\\..\\x", "unsafe path"),
        (_link("data/link"), "link"),
    ],
)
def test_unsafe_entries_are_refused_before_extracting(
    signed: Path, tmp_path: Path, name: zipfile.ZipInfo | str, why: str
) -> None:
    bad = _rewrite(signed, tmp_path / "site" / "bad.zip", [(name, b"/etc/passwd")])
    with pytest.raises(DataError) as err:
        open_pack(bad, cache_dir=tmp_path / "cache")
    assert err.value.code == "pack_invalid" and why in err.value.message
    assert not list((tmp_path / "cache").rglob("*.parquet"))


def test_a_zip_bomb_is_refused_before_it_expands(signed: Path, tmp_path: Path) -> None:
    bomb = tmp_path / "site" / "bomb.zip"
    with zipfile.ZipFile(signed) as zin, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info, zin.read(info))
        with zout.open("data/zeros.bin", "w") as out:
            chunk = bytes(1 << 20)
            for _ in range(64):
                out.write(chunk)
    assert bomb.stat().st_size < 1 << 20
    with pytest.raises(DataError) as err:
        open_pack(bomb, cache_dir=tmp_path / "cache")
    assert err.value.code == "pack_invalid" and "zip bomb" in err.value.message
    assert sum(p.stat().st_size for p in (tmp_path / "cache").rglob("*") if p.is_file()) == 0


def test_the_expanded_size_is_capped(signed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVBUILDER_MAX_PACK_BYTES", "1000")
    with pytest.raises(DataError) as err:
        open_pack(signed, cache_dir=tmp_path / "cache")
    assert err.value.code == "pack_invalid" and "ENVBUILDER_MAX_PACK_BYTES" in err.value.message
