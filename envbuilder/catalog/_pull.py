"""Pull what others published: a ``catalog.json`` or a pack at a URL, into the cache, verified.

A catalog URL is read afresh each time (a copy is kept in ``<cache>/catalogs/`` and used, with a
warning, when the store cannot be reached); each chosen pack is downloaded once into
``<cache>/pulled/<sha256>.zip``, checked against the sha256 the catalog states and against its
signature (see ``_trust``) before it is extracted and checked file by file against its lock
(``_pack``). A later pull or serve of the same version reads nothing but the catalog.
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from envbuilder import paths
from envbuilder.catalog._binding import check_entry
from envbuilder.catalog._pack import open_pack
from envbuilder.catalog._trust import SIGNATURE_SUFFIX, TrustPolicy, check_sha256, read_lock
from envbuilder.data._cache import atomic_write, build_lock
from envbuilder.data._remote import check_hint, download_failed, fetch, filesystem, is_url
from envbuilder.errors import DataError

__all__ = ["Pulled", "pull"]

log = logging.getLogger("envbuilder.catalog")


@dataclass(frozen=True)
class Pulled:
    """A pack pulled into the cache and verified."""

    name: str
    version: str
    pack: Path
    """The verified pack in the cache (serve it like any local pack)."""
    url: str
    signed: bool = False
    """Its lock's signature verified with the trusted key: its own code may run."""


def pull(
    url: str,
    *,
    envs: list[str] | None = None,
    cache_dir: Path | None = None,
    trust: TrustPolicy | None = None,
) -> list[Pulled]:
    """Download and verify the packs of the catalog (or the pack) at ``url``.

    Args:
        envs: ``NAME`` or ``NAME@VERSION`` of the environments to pull from a catalog (default:
            the current version of every environment).

    Raises:
        DataError: the URL cannot be read, an environment or version is not in the catalog
            (``catalog_unknown_env``), or a check fails (``pack_mismatch``, ``signature_*``).
    """
    trust = trust or TrustPolicy()
    cache = cache_dir or paths.cache_dir()
    if url.lower().endswith(".zip"):
        if envs:
            raise DataError(f"--env picks from a catalog, but {url!r} is a pack", code="catalog_unknown_env")
        return [_pull_pack_url(url, cache, trust)]
    catalog = _read_catalog(url, cache)
    base = url.rsplit("/", 1)[0]
    try:
        picks = _choose(catalog, envs, url)
    except (KeyError, TypeError, AttributeError) as exc:  # a catalog is data from elsewhere
        raise DataError(
            f"{url!r} is not a valid envbuilder catalog: {type(exc).__name__}: {exc}",
            hint="Publish it again with `envbuilder publish`",
            code="catalog_invalid",
        ) from None
    out = []
    for entry, version in picks:
        what = f"{entry['name']}@{version['version']} from {url}"
        ref = _checked_ref(version.get("pack"), what)
        pack = _download(posixpath.join(base, ref["path"]), ref["sha256"], cache)
        signature = _signature(base, ref.get("signature"), cache, ref["sha256"])
        lock = read_lock(pack)
        signed = trust.check(lock, signature, what)
        check_entry(lock, entry, version, what)
        open_pack(pack, cache_dir=cache, lock=lock)
        out.append(Pulled(entry["name"], str(version["version"]), pack, url, signed))
    return out


def _choose(
    catalog: dict[str, Any], wanted: list[str] | None, url: str
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    entries = {e["name"]: e for e in catalog["environments"] if e.get("versions")}
    if not entries:
        raise DataError(
            f"the catalog {url!r} lists no published pack",
            hint="Publish with `envbuilder publish SPECS… DEST`; `envbuilder catalog` writes no packs",
            code="catalog_unknown_env",
        )
    picks = []
    for want in wanted or list(entries):
        name, _, version = want.partition("@")
        entry = entries.get(name)
        if entry is None:
            raise DataError(
                f"no environment {name!r} in the catalog {url!r}",
                hint=f"It lists: {', '.join(sorted(entries))}",
                code="catalog_unknown_env",
            )
        versions = entry["versions"]
        labels = [str(v["version"]) for v in versions]
        chosen = next(
            (v for v, label in zip(versions, labels, strict=True) if not version or label == version), None
        )
        if chosen is None:
            raise DataError(
                f"no version {version!r} of {name!r} in the catalog {url!r}",
                hint=f"It lists: {', '.join(labels)}",
                code="catalog_unknown_env",
            )
        picks.append((entry, chosen))
    return picks


_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _checked_ref(ref: Any, what: str) -> dict[str, Any]:
    """A catalog's pack reference, refused unless it names files under the catalog's folder and a
    sha256 (a catalog is data from elsewhere: it must not point the cache or a read elsewhere)."""
    names = [ref.get(k) for k in ("path", "signature")] if isinstance(ref, dict) else []
    bad = not names or not isinstance(names[0], str) or not _SHA256.match(str(ref.get("sha256")))
    for name in filter(None, names):
        parts = PurePosixPath(str(name)).parts
        bad = bad or not isinstance(name, str) or name.startswith("/") or ".." in parts or ":" in name
    if bad:
        raise DataError(
            f"{what}: the catalog's pack entry is not valid: {ref!r}",
            hint="A pack is named by a path under the catalog's folder and its sha256; publish again",
            code="catalog_invalid",
        )
    return dict(ref)


def _read_catalog(url: str, cache: Path) -> dict[str, Any]:
    copy = cache / "catalogs" / f"{hashlib.blake2b(url.encode(), digest_size=16).hexdigest()}.json"
    data: bytes | None = None
    if is_url(url):
        fs, path = filesystem(url)
        try:
            data = fs.cat_file(path)
        except FileNotFoundError:
            raise DataError(f"no catalog at {url!r}", hint="Check the URL", code="remote_not_found") from None
        except Exception as exc:  # offline, or credentials expired: serve what we pulled before
            if not copy.is_file():
                raise DataError(
                    f"cannot read the catalog {url!r}: {type(exc).__name__}: {exc}",
                    hint=check_hint(url),
                    code="remote_unavailable",
                ) from None
            log.warning("cannot reach %s (%s); using the copy read before", url, exc)
    else:
        try:
            data = Path(url).read_bytes()
        except OSError as exc:
            raise DataError(
                f"cannot read the catalog {url!r}: {exc.strerror}", code="remote_not_found"
            ) from None
    if data is None:
        data = copy.read_bytes()
    try:
        catalog = json.loads(data)
        if not isinstance(catalog.get("environments"), list):
            raise ValueError("no `environments` list")
    except (ValueError, AttributeError) as exc:
        raise DataError(f"{url!r} is not an envbuilder catalog: {exc}", code="catalog_invalid") from None
    with atomic_write(copy) as tmp:
        tmp.write_bytes(data)
    return dict(catalog)


def _download(url: str, sha256: str, cache: Path) -> Path:
    """The pack at ``url`` in the cache, checked against the ``sha256`` the catalog states."""
    dest = cache / "pulled" / f"{sha256}.zip"
    with build_lock(dest):
        if not dest.exists():
            fs, path = filesystem(url)
            try:
                with atomic_write(dest) as tmp:
                    fs.get_file(path, str(tmp))
                    check_sha256(tmp, sha256, f"the pack {url!r}")
            except DataError:
                raise
            except FileNotFoundError:
                raise DataError(
                    f"the catalog names {url!r}, which does not exist",
                    hint="The store lost a file the catalog needs; publish again",
                    code="remote_not_found",
                ) from None
            except Exception as exc:
                raise download_failed(url, exc) from None
    check_sha256(dest, sha256, f"the cached pack {str(dest)!r}")
    return dest


def _signature(base: str, name: str | None, cache: Path, sha256: str) -> bytes | None:
    if not name:
        return None
    dest = cache / "pulled" / f"{sha256}.zip{SIGNATURE_SUFFIX}"
    if not dest.exists():
        fs, path = filesystem(posixpath.join(base, name))
        try:
            data = fs.cat_file(path)
        except Exception as exc:
            raise DataError(
                f"cannot read the signature {posixpath.join(base, name)!r}: {type(exc).__name__}: {exc}",
                hint=check_hint(base),
                code="remote_unavailable",
            ) from None
        with atomic_write(dest) as tmp:
            tmp.write_bytes(data)
    return dest.read_bytes()


def _pull_pack_url(url: str, cache: Path, trust: TrustPolicy) -> Pulled:
    """A pack named by its URL: fetched by the object's version, its signature beside its lock."""
    pack = fetch(url) if is_url(url) else Path(url)
    lock_url = url[: -len(".zip")] + ".lock.json" + SIGNATURE_SUFFIX
    signature: bytes | None
    try:
        signature = fetch(lock_url).read_bytes() if is_url(url) else Path(lock_url).read_bytes()
    except (DataError, OSError):
        signature = None
    lock_bytes = read_lock(pack)
    signed = trust.check(lock_bytes, signature, url)
    open_pack(pack, cache_dir=cache, lock=lock_bytes)
    lock = json.loads(lock_bytes)
    return Pulled(str(lock.get("name")), str(lock.get("version")), pack, url, signed)
