"""Publish environments: packs, their locks, ``catalog.json`` and the catalog site, to any store.

Layout under the destination::

    catalog.json  index.html  env/<name>.html
    packs/<name>/<name>-<version>-<sha256[:16]>.zip             content-addressed by the zip's bytes
    packs/<name>/<name>-<version>-<sha256[:16]>.lock.json       the lock inside it, readable alone
    packs/<name>/<name>-<version>-<sha256[:16]>.lock.json.sig   its Ed25519 signature (--sign-key)

Each catalog entry is the one ``catalog`` writes, plus ``pack`` (the current version's files and
sha256), ``versions`` (every version ever published, newest first, each with its pack) and
``serve`` (the command that serves it from here). Publishing again reads the catalog already
there: an environment whose content hash is already listed reuses that version's pack, a site
file whose bytes are unchanged is not uploaded, and nothing is ever deleted, so every version
listed stays servable. Packs go up before the catalog that names them.
"""

from __future__ import annotations

import datetime
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envbuilder._version import __version__
from envbuilder.catalog._collect import LoadFailure
from envbuilder.catalog._entry import catalog_entry
from envbuilder.catalog._files import file_sha256
from envbuilder.catalog._pack import pack
from envbuilder.catalog._site import write_site
from envbuilder.catalog._store import PublishStore, open_store
from envbuilder.catalog._trust import SIGNATURE_SUFFIX, read_lock, sign_lock
from envbuilder.environment import load_environment
from envbuilder.errors import DataError, EnvbuilderError

__all__ = ["CATALOG_NAME", "PublishReport", "publish", "serve_command"]

CATALOG_NAME = "catalog.json"


@dataclass
class PublishReport:
    """What :func:`publish` did at ``url``."""

    url: str
    catalog_url: str
    uploaded: list[str] = field(default_factory=list)
    """Destination paths uploaded, in upload order."""
    unchanged: list[str] = field(default_factory=list)
    """Destination paths already there with the same content."""
    environments: list[str] = field(default_factory=list)
    """``name@version`` of each environment published."""


def serve_command(catalog_url: str, name: str, version: str) -> str:
    """The command that serves ``name@version`` from the catalog at ``catalog_url``."""
    return f"envbuilder serve {catalog_url} --env {name}@{version}"


def publish(
    specs: list[Path], dest: str, *, sign_key: Path | None = None, trust_code: bool | None = None
) -> PublishReport:
    """Publish the environments of ``specs`` (spec files) to ``dest``; ``trust_code`` as in
    :func:`~envbuilder.catalog.pack`.

    Raises:
        SpecError: a spec does not load.
        DataError: the destination cannot be read or written (``publish_failed``, naming it and
            what to check), its catalog is not one envbuilder wrote (``publish_destination``), or
            a spec cannot be packed.
    """
    store = open_store(dest)
    catalog_url = f"{store.url}/{CATALOG_NAME}"
    report = PublishReport(store.url, catalog_url)
    old = _old_catalog(store)
    present = store.names()
    entries: dict[str, dict[str, Any]] = {e["name"]: e for e in old["environments"]}
    uploads: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="envbuilder-publish-") as scratch:
        tmp = Path(scratch)
        failures: list[LoadFailure] = []
        for i, spec in enumerate(specs):
            try:
                env = load_environment(spec, trust_code=trust_code)
                entry = catalog_entry(env)
                versions: list[dict[str, Any]] = list(entries.get(env.name, {}).get("versions", []))
                same = next((v for v in versions if v["content_hash"] == entry["content_hash"]), None)
                if same is None:
                    _check_version_free(env.name, str(entry["version"]), versions, spec, store.url)
                # A version already published (and still all there) is reused, not packed again.
                reuse = same is not None and set(_pack_files(same["pack"])) <= present
                made = None if reuse else _make_pack(spec, tmp / str(i), sign_key, trust_code)
            except EnvbuilderError as exc:
                failures.append(LoadFailure(spec, exc))
                continue
            if made is None:
                assert same is not None
                report.unchanged += _pack_files(same["pack"])
            else:
                ref, files = made
                uploads.update({n: p for n, p in files.items() if n not in present})
                report.unchanged += [n for n in files if n in present]
                if same is None:
                    same = {"version": entry["version"], "content_hash": entry["content_hash"]}
                    versions.insert(0, same)
                same.update(pack=ref, published=_now())
            entry["pack"] = same["pack"]
            entry["versions"] = versions
            entry["serve"] = serve_command(catalog_url, env.name, str(entry["version"]))
            entries[env.name] = entry
            report.environments.append(f"{env.name}@{entry['version']}")
        if failures:  # every problem at once, and nothing uploaded
            raise DataError(
                f"nothing published to {store.url}: {len(failures)} spec(s) cannot be packed:\n"
                + "\n".join(str(f) for f in failures),
                code="publish_failed",
            )
        catalog = {"envbuilder": __version__, "environments": list(entries.values())}
        site = tmp / "site"
        for path in write_site(catalog, site):
            name = path.relative_to(site).as_posix()
            if store.read(name) == path.read_bytes():
                report.unchanged.append(name)
            else:
                uploads[name] = path
        # Packs first, the catalog last: a reader never sees a catalog naming a missing pack.
        order = sorted(uploads, key=lambda n: (n == CATALOG_NAME, not n.startswith("packs/"), n))
        if order:
            store.put({n: uploads[n] for n in order}, f"envbuilder publish: {', '.join(report.environments)}")
        report.uploaded = order
    return report


def _check_version_free(
    name: str, version: str, versions: list[dict[str, Any]], spec: Path, url: str
) -> None:
    """Refuse new content under a version already published: two entries ``name@version`` would
    be listed, and ``--env name@version`` could only ever reach one of them."""
    taken = next((v for v in versions if str(v.get("version")) == version), None)
    if taken is not None:
        raise DataError(
            f"{name}@{version} is already published at {url} with other content "
            f"(content hash {str(taken.get('content_hash'))[:19]}…)",
            hint=f"Set a new `version:` in {spec} (every published version stays servable)",
            code="publish_version_taken",
        )


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat()


def _pack_files(ref: dict[str, Any]) -> list[str]:
    return [ref[k] for k in ("path", "lock", "signature") if ref.get(k)]


def _make_pack(
    spec: Path, folder: Path, sign_key: Path | None, trust_code: bool | None
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Pack ``spec`` under ``folder``; its catalog reference and its files by destination path."""
    folder.mkdir(parents=True)
    info = pack(spec, folder / "pack.zip", trust_code=trust_code)
    sha = file_sha256(info.path)
    stem = f"packs/{info.name}/{info.name}-{_lock_version(info.path)}-{sha[:16]}"
    lock = read_lock(info.path)
    lock_file = folder / "lock.json"
    lock_file.write_bytes(lock)
    files = {f"{stem}.zip": info.path, f"{stem}.lock.json": lock_file}
    ref: dict[str, Any] = {
        "path": f"{stem}.zip",
        "sha256": sha,
        "bytes": info.path.stat().st_size,
        "lock": f"{stem}.lock.json",
        "signature": None,
    }
    if sign_key is not None:
        sig = folder / "lock.json.sig"
        sig.write_bytes(sign_lock(lock, sign_key))
        files[f"{stem}.lock.json{SIGNATURE_SUFFIX}"] = sig
        ref["signature"] = f"{stem}.lock.json{SIGNATURE_SUFFIX}"
    return ref, files


def _lock_version(path: Path) -> str:
    version = str(json.loads(read_lock(path)).get("version") or "0")
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in version)


def _old_catalog(store: PublishStore) -> dict[str, Any]:
    data = store.read(CATALOG_NAME)
    if data is None:
        return {"environments": []}
    try:
        catalog = json.loads(data)
        envs = catalog["environments"]
        if not isinstance(envs, list) or not all(isinstance(e, dict) and "name" in e for e in envs):
            raise ValueError("`environments` is not a list of entries")
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(
            f"{store.url}/{CATALOG_NAME} is not a catalog envbuilder can add to: {exc}",
            hint="Publish to an empty destination, or fix or remove that file",
            code="publish_destination",
        ) from None
    return dict(catalog)
