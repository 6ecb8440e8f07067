"""A catalog entry, the lock of the pack it names and the spec inside are one environment: its
name, version and content hash agree, or nothing is pulled or served. A signature vouches for a
lock, not for the catalog line that points at it: a signed ``squares@1`` pack listed as
``squares@2`` must not pass as v2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from envbuilder.catalog import load_pack, publish
from envbuilder.catalog._binding import check_entry, check_spec
from envbuilder.errors import DataError
from envbuilder.spec import parse_spec
from tests.catalog.test_pull import SPEC, keys, spec  # noqa: F401 - fixtures


def envbuilder(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envbuilder", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )


def _two_versions(path: Path, site: Path, key: Path) -> dict[str, Any]:
    """squares@1 then squares@2 published, signed, to ``site``; its catalog."""
    publish([path], str(site), sign_key=key)
    path.write_text(SPEC.format(version="2").replace("squared?", "squared, exactly?"))
    publish([path], str(site), sign_key=key)
    return dict(json.loads((site / "catalog.json").read_text()))


def _write(site: Path, catalog: dict[str, Any]) -> None:
    (site / "catalog.json").write_text(json.dumps(catalog))


@pytest.mark.parametrize("with_its_hash", [False, True], ids=["pack", "pack-and-hash"])
def test_a_version_pointing_at_another_versions_signed_pack_is_refused(
    spec: Path,  # noqa: F811 - the fixture
    keys: dict[str, Path],  # noqa: F811 - the fixture
    tmp_path: Path,
    with_its_hash: bool,
) -> None:
    site = tmp_path / "site"
    catalog = _two_versions(spec, site, keys["publisher"])
    entry = catalog["environments"][0]
    v2, v1 = entry["versions"]  # newest first
    assert (v2["version"], v1["version"]) == ("2", "1")
    v2["pack"] = entry["pack"] = v1["pack"]  # the signed v1 pack, listed as v2
    if with_its_hash:
        v2["content_hash"] = v1["content_hash"]
    _write(site, catalog)
    trust = ["--require-signature", "--trusted-key", str(keys["publisher.pub"])]
    cache = ["--cache-dir", str(tmp_path / "cache")]
    url = str(site / "catalog.json")
    pulled = envbuilder("pull", url, "--env", "squares@2", *trust, *cache)
    assert pulled.returncode == 1, pulled.stdout
    assert pulled.stderr == (
        f"error: squares@2 from {url}: the catalog's entry points at a pack whose lock says squares@1; "
        "refusing to serve it as squares@2. The catalog was changed or mixed up after publishing; "
        "publish again\n"
    )
    served = envbuilder("serve", url, "--env", "squares@2", "--port", "0", *trust, *cache)
    assert served.returncode == 1 and "whose lock says squares@1" in served.stderr
    assert "serving" not in served.stdout
    # v1 is still what it says it is.
    assert envbuilder("pull", url, "--env", "squares@1", *trust, *cache).returncode == 0


def test_an_environment_pointing_at_another_environments_pack_is_refused(
    spec: Path,  # noqa: F811 - the fixture
    keys: dict[str, Path],  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    publish([spec], str(site), sign_key=keys["publisher"])
    catalog = json.loads((site / "catalog.json").read_text())
    impostor = json.loads(json.dumps(catalog["environments"][0]))
    impostor["name"] = "cubes"
    catalog["environments"].append(impostor)
    _write(site, catalog)
    url = str(site / "catalog.json")
    pulled = envbuilder(
        "pull",
        url,
        "--env",
        "cubes",
        "--trusted-key",
        str(keys["publisher.pub"]),
        "--cache-dir",
        str(tmp_path),
    )
    assert pulled.returncode == 1
    assert (
        "cubes@1 from" in pulled.stderr
        and "whose lock says squares@1; refusing to serve it as cubes@1" in (pulled.stderr)
    )


def test_a_content_hash_that_is_not_the_locks_is_refused(
    spec: Path,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    publish([spec], str(site))
    catalog = json.loads((site / "catalog.json").read_text())
    version = catalog["environments"][0]["versions"][0]
    lock_hash, version["content_hash"] = version["content_hash"], "sha256:" + "0" * 64
    _write(site, catalog)
    pulled = envbuilder("pull", str(site / "catalog.json"), "--cache-dir", str(tmp_path / "cache"))
    assert pulled.returncode == 1
    assert (
        f"the pack's lock has the content hash {lock_hash}, the catalog's entry sha256:000" in pulled.stderr
    )


def test_a_lock_that_names_another_environment_than_its_spec_is_refused(
    spec: Path,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    publish([spec], str(site))
    made = site / json.loads((site / "catalog.json").read_text())["environments"][0]["pack"]["path"]
    renamed = tmp_path / "renamed.zip"
    with zipfile.ZipFile(made) as src, zipfile.ZipFile(renamed, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "envbuilder.lock.json":
                lock = json.loads(data)
                lock["name"], lock["version"] = "cubes", "7"
                data = json.dumps(lock).encode()
            dst.writestr(info, data)
    with pytest.raises(DataError) as info:
        load_pack(renamed, cache_dir=tmp_path / "cache")
    assert info.value.code == "pack_mismatch"
    assert str(info.value) == (
        f"pack {str(renamed)!r}: its lock says cubes@7, its spec is squares@1. The pack was not made "
        "by `envbuilder pack`; get it again from its publisher"
    )


LOCK = json.dumps({"name": "base", "version": "2", "content_hash": "sha256:aa"}).encode()


def test_the_entry_check_in_detail() -> None:
    check_entry(LOCK, {"name": "base"}, {"version": "2", "content_hash": "sha256:aa"}, "w")
    check_entry(
        LOCK, {"name": "base"}, {"version": 2, "content_hash": "sha256:aa"}, "w"
    )  # a number, as labelled
    refused = {
        "name": ({"name": "other"}, {"version": "2", "content_hash": "sha256:aa"}),
        "version": ({"name": "base"}, {"version": "1", "content_hash": "sha256:aa"}),
        "hash": ({"name": "base"}, {"version": "2", "content_hash": "sha256:bb"}),
        "no hash": ({"name": "base"}, {"version": "2"}),
    }
    points = "w: the catalog's entry points at a pack whose lock says base@2; refusing to serve it as"
    said = {
        "name": f"{points} other@2",
        "version": f"{points} base@1",
        "hash": "w: the pack's lock has the content hash sha256:aa, the catalog's entry sha256:bb; "
        "refusing to serve it",
        "no hash": "w: the pack's lock has the content hash sha256:aa, the catalog's entry None; "
        "refusing to serve it",
    }
    for why, (entry, version) in refused.items():
        with pytest.raises(DataError) as info:
            check_entry(LOCK, entry, version, "w")
        assert (info.value.code, str(info.value)) == (
            "pack_mismatch",
            f"{said[why]}. The catalog was changed or mixed up after publishing; publish again",
        ), why
    for lock in (b"not json", b"[]", b'{"name": "base", "version": "2"}'):
        with pytest.raises(DataError, match=r"^w: the pack's lock is not readable: ") as info:
            check_entry(lock, {"name": "base"}, {"version": "2", "content_hash": "sha256:aa"}, "w")
        assert info.value.code == "pack_invalid"


def test_the_spec_check_in_detail(tmp_path: Path) -> None:
    parsed = parse_spec(SPEC.format(version="2"), file="squares.yaml").spec
    check_spec(parsed, {"name": "squares", "version": "2"}, tmp_path / "p.zip")
    for lock in ({"name": "cubes", "version": "2"}, {"name": "squares", "version": "1"}):
        with pytest.raises(DataError) as info:
            check_spec(parsed, lock, tmp_path / "p.zip")
        assert info.value.code == "pack_mismatch"
        assert str(info.value) == (
            f"pack {str(tmp_path / 'p.zip')!r}: its lock says {lock['name']}@{lock['version']}, its spec is "
            "squares@2. The pack was not made by `envbuilder pack`; get it again from its publisher"
        )
