"""Serving what others published: catalogs over HTTP, offline re-use, tampering, signatures."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envbuilder.catalog import TrustPolicy, publish, pull
from envbuilder.cli import app
from envbuilder.errors import DataError
from tests.catalog.conftest import write_data
from tests.stores import static_http

SPEC = """\
name: squares
version: "{version}"
dataset:
  type: parquet
  files:
    train: data/squares.parquet
splits:
  train: {{type: train}}
prompt:
  template: "What is {{{{ n }}}} squared?"
grader:
  type: exact_match
  target: "{{{{ square }}}}"
"""


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The apps ``envbuilder serve`` would run, instead of starting uvicorn."""
    import uvicorn

    apps: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: apps.append(app))
    return apps


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    write_data(folder)
    path = folder / "squares.yaml"
    path.write_text(SPEC.format(version="1"))
    return path


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Path]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    out = {}
    for who in ("publisher", "stranger"):
        key = Ed25519PrivateKey.generate()
        out[who] = tmp_path / f"{who}.pem"
        out[who].write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        out[f"{who}.pub"] = tmp_path / f"{who}.pub"
        out[f"{who}.pub"].write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
    return out


def _entry(site: Path) -> dict[str, Any]:
    return dict(json.loads((site / "catalog.json").read_text())["environments"][0])


def test_serve_a_catalog_over_http_then_offline(spec: Path, tmp_path: Path, served: list[Any]) -> None:
    site = tmp_path / "site"
    publish([spec], str(site))
    page = (site / "env" / "squares.html").read_text()
    assert f"envbuilder serve {site}/catalog.json --env squares@1" in page
    runner = CliRunner()
    with static_http(site) as base:
        result = runner.invoke(app, ["serve", f"{base}/catalog.json", "--env", "squares"])
        assert result.exit_code == 0, result.output
        assert "serving squares (train 4 tasks)" in result.output
        pack_url = f"{base}/{_entry(site)['pack']['path']}"
        assert runner.invoke(app, ["pull", pack_url]).exit_code == 0  # a pack's URL works too
    # The server is gone: the catalog copy and the pulled pack serve without it.
    result = runner.invoke(app, ["serve", f"{base}/catalog.json"])
    assert result.exit_code == 0, result.output
    assert len(served) == 2


def test_a_pack_that_does_not_match_the_catalog_is_refused(spec: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    publish([spec], str(site))
    pack = site / _entry(site)["pack"]["path"]
    pack.write_bytes(pack.read_bytes() + b"\0")
    with pytest.raises(DataError, match=r"the pack '.*\.zip': sha256 \w+…, the catalog says \w+…; refusing"):
        pull(str(site / "catalog.json"), cache_dir=tmp_path / "cache")
    assert not list((tmp_path / "cache" / "pulled").glob("*.zip"))


def test_a_modified_pack_is_refused_even_when_the_catalog_was_updated(spec: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    publish([spec], str(site))
    pack = site / _entry(site)["pack"]["path"]
    changed = tmp_path / "changed.zip"
    with zipfile.ZipFile(pack) as src, zipfile.ZipFile(changed, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(
                info, data.replace(b"squared", b"cubed") if info.filename.endswith(".yaml") else data
            )
    changed.replace(pack)
    from envbuilder.catalog import file_sha256

    catalog = json.loads((site / "catalog.json").read_text())
    for ref in [catalog["environments"][0]["pack"], catalog["environments"][0]["versions"][0]["pack"]]:
        ref["sha256"] = file_sha256(pack)
    (site / "catalog.json").write_text(json.dumps(catalog))
    with pytest.raises(
        DataError, match=r"does not match its lock, refusing to serve it:\n  squares.yaml: sha256"
    ):
        pull(str(site / "catalog.json"), cache_dir=tmp_path / "cache")


def test_a_modified_cached_file_is_refused(spec: Path, tmp_path: Path, served: list[Any]) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    publish([spec], str(site))
    args = ["serve", str(site / "catalog.json"), "--cache-dir", str(cache)]
    assert CliRunner().invoke(app, args).exit_code == 0
    (extracted,) = (cache / "packs").glob("*/data/squares.parquet")
    extracted.write_bytes(extracted.read_bytes()[:-1] + b"\1")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "does not match its lock, refusing to serve it" in result.output
    assert "data/squares.parquet: sha256" in result.output
    extracted.parent.parent.rename(tmp_path / "moved")  # the extraction again, now the download
    (pulled,) = (cache / "pulled").glob("*.zip")
    pulled.write_bytes(pulled.read_bytes() + b"\0")
    result = CliRunner().invoke(app, args)
    assert (
        result.exit_code == 1 and "the cached pack" in result.output and "refusing to use it" in result.output
    )
    assert len(served) == 1


def test_signatures_required_checked_and_refused(
    spec: Path, tmp_path: Path, keys: dict[str, Path], served: list[Any]
) -> None:
    unsigned, signed = tmp_path / "unsigned", tmp_path / "signed"
    publish([spec], str(unsigned))
    publish([spec], str(signed), sign_key=keys["publisher"])
    assert _entry(signed)["pack"]["signature"].endswith(".lock.json.sig")
    runner = CliRunner()

    def serve(site: Path, *extra: str) -> Any:
        cache = tmp_path / f"cache-{len(served)}-{site.name}-{len(extra)}"
        return runner.invoke(app, ["serve", str(site / "catalog.json"), "--cache-dir", str(cache), *extra])

    trusted = ["--trusted-key", str(keys["publisher.pub"])]
    result = serve(unsigned, "--require-signature", *trusted)
    assert result.exit_code == 1
    assert (
        "squares@1 from" in result.output
        and "has no signature and --require-signature is set" in result.output
    )
    result = serve(signed, "--require-signature", "--trusted-key", str(keys["stranger.pub"]))
    assert result.exit_code == 1 and "the signature over its lock does not verify" in result.output
    assert not served
    assert serve(signed, "--require-signature", *trusted).exit_code == 0
    assert serve(unsigned).exit_code == 0  # no policy: unsigned packs serve as before
    assert len(served) == 2
    result = serve(signed, "--require-signature")
    assert result.exit_code == 1 and "needs the public key" in result.output


def test_a_local_spec_is_refused_when_a_signature_is_required(spec: Path, keys: dict[str, Path]) -> None:
    result = CliRunner().invoke(
        app, ["serve", str(spec), "--require-signature", "--trusted-key", str(keys["publisher.pub"])]
    )
    assert result.exit_code == 1 and "is not a signed pack (--require-signature)" in result.output


def test_unknown_environment_and_version_name_what_the_catalog_lists(spec: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    publish([spec], str(site))
    spec.write_text(SPEC.format(version="2"))
    publish([spec], str(site))
    assert [v["version"] for v in _entry(site)["versions"]] == ["2", "1"]
    with pytest.raises(DataError, match=r"no version '3' of 'squares' .* It lists: 2, 1"):
        pull(str(site / "catalog.json"), envs=["squares@3"], cache_dir=tmp_path / "c")
    with pytest.raises(DataError, match=r"no environment 'cubes' .* It lists: squares"):
        pull(str(site / "catalog.json"), envs=["cubes"], cache_dir=tmp_path / "c")
    (old,) = pull(
        str(site / "catalog.json"), envs=["squares@1"], cache_dir=tmp_path / "c", trust=TrustPolicy()
    )
    assert old.version == "1"


@pytest.mark.parametrize(
    "change",
    [
        {"path": "../../outside.zip"},
        {"path": "/etc/passwd"},
        {"path": "s3://elsewhere/x.zip"},
        {"sha256": "../../x"},
        {"signature": "../x.sig"},
    ],
)
def test_a_catalog_cannot_point_outside_its_folder(
    spec: Path, tmp_path: Path, change: dict[str, str]
) -> None:
    site = tmp_path / "site"
    publish([spec], str(site))
    catalog = json.loads((site / "catalog.json").read_text())
    catalog["environments"][0]["versions"][0]["pack"].update(change)
    (site / "catalog.json").write_text(json.dumps(catalog))
    with pytest.raises(DataError, match=r"squares@1 from .*: the catalog's pack entry is not valid"):
        pull(str(site / "catalog.json"), cache_dir=tmp_path / "cache")


def test_a_malformed_catalog_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "catalog.json").write_text(json.dumps({"environments": [{"name": "x", "versions": [{}]}]}))
    with pytest.raises(DataError, match=r"is not a valid envbuilder catalog: KeyError: 'version'"):
        pull(str(tmp_path / "catalog.json"), cache_dir=tmp_path / "cache")


def test_a_key_of_the_wrong_kind_or_unreadable_is_refused_with_a_hint(
    keys: dict[str, Path], tmp_path: Path
) -> None:
    from envbuilder.catalog._trust import sign_lock

    # A public key where the signing key belongs, and a private key where the trusted key belongs.
    with pytest.raises(DataError) as signing:
        sign_lock(b"lock", keys["publisher.pub"])
    assert (signing.value.code, signing.value.hint) == (
        "signature_key",
        "Give an unencrypted Ed25519 key (PEM): openssl genpkey -algorithm ed25519 -out key.pem",
    )
    assert str(keys["publisher.pub"]) in signing.value.message
    with pytest.raises(DataError) as trusted:
        TrustPolicy(keys["publisher"])
    assert (trusted.value.code, trusted.value.hint) == (
        "signature_key",
        "Give an Ed25519 public key in PEM: openssl pkey -in key.pem -pubout -out key.pub",
    )
    assert trusted.value.message.startswith(f"cannot read the trusted key {str(keys['publisher'])!r}")
    with pytest.raises(DataError, match="cannot read the signing key"):
        sign_lock(b"lock", tmp_path / "missing.pem")
    assert len(sign_lock(b"lock", keys["publisher"])) == 64
