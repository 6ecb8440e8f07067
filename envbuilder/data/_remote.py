"""Files at URLs (``s3://``, ``gs://``, ``https://``, ``hf://``): fetched once into the cache, keyed by
the object's version, then read like local files.

Only this module reaches remote storage, through ``fsspec`` (``s3fs`` for S3 and S3-compatible
stores, ``gcsfs`` for Google Cloud Storage, ``huggingface_hub`` for ``hf://``, aiohttp for
https). Credentials come from where each library looks (``AWS_*`` variables and profiles,
``AWS_ENDPOINT_URL`` for an S3-compatible store, Google's application-default credentials,
``HF_TOKEN``); never from a spec.

Cache layout, under ``<cache>/remote/``:

* ``<key>/<file name>``: the object, where ``key`` hashes the URL and the object's version as the
  store reports it (S3 ``VersionId`` or ``ETag``, GCS ``generation``, the Hub's blob id or LFS
  sha256, an https ``ETag``); never a timestamp. A server that reports none (a plain static
  server) gets the object downloaded again on each process start and keyed by its sha256.
* ``urls/<hash of URL>.json``: the last version seen, so a host that lost the network (or the
  credentials) serves the copy it has, with a warning.

Several processes on one host share one download: the first takes an exclusive ``flock`` on
the entry's lock file while it downloads into a temporary name and renames it into place; the
others wait on the lock and find the file there. The same lock guards the row index that the
Parquet source builds from the copy (see :func:`build_lock`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import urllib.parse
from pathlib import Path, PurePosixPath
from typing import Any

from envbuilder.data._cache import atomic_write, build_lock
from envbuilder.errors import DataError
from envbuilder.paths import cache_dir

__all__ = ["REMOTE_SCHEMES", "check_hint", "fetch", "filesystem", "is_url"]

log = logging.getLogger("envbuilder.data")

#: URL schemes served from remote storage.
REMOTE_SCHEMES = ("s3", "gs", "gcs", "http", "https", "hf")
_URL = re.compile(r"^([a-z][a-z0-9+.-]*)://", re.I)
#: Fields of ``fs.info()`` that name an object's version, most specific first.
_VERSION_FIELDS = ("VersionId", "generation", "lfs", "blob_id", "ETag", "etag", "md5Hash")
_PACKAGE = {"s3": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "hf": "huggingface_hub", "http": "aiohttp"}
_CHECK = {
    "s3": "AWS credentials (AWS_ACCESS_KEY_ID/AWS_PROFILE), AWS_ENDPOINT_URL for an S3-compatible store, "
    "and the bucket name",
    "gs": "Google credentials (GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login`)",
    "hf": "HF_TOKEN (or `huggingface-cli login`) and the repository name",
    "http": "the URL and that the server is reachable",
}


def is_url(text: str) -> bool:
    """Whether ``text`` is a URL of a remote store envbuilder reads (not a local path)."""
    match = _URL.match(text)
    return match is not None and match.group(1).lower() in REMOTE_SCHEMES


def _scheme(url: str) -> str:
    match = _URL.match(url)
    scheme = match.group(1).lower() if match else "file"
    return {"gcs": "gs", "https": "http"}.get(scheme, scheme)


def check_hint(url: str) -> str:
    """What to check when ``url`` cannot be reached."""
    return "Check " + _CHECK.get(_scheme(url), "the path")


def filesystem(url: str) -> tuple[Any, str]:
    """The fsspec filesystem of ``url`` and the path inside it (a fresh instance: settings such
    as ``AWS_ENDPOINT_URL`` are read now, not when a cached instance was made)."""
    import fsspec

    try:
        return fsspec.core.url_to_fs(url, skip_instance_cache=True)
    except ImportError as exc:
        package = _PACKAGE.get(_scheme(url), "fsspec")
        raise DataError(
            f"reading {url!r} needs the {package!r} package ({exc})",
            hint=f"pip install {package}",
            code="remote_unavailable",
        ) from None
    except ValueError as exc:
        raise DataError(
            f"not a URL envbuilder can read: {url!r} ({exc})", code="remote_unavailable"
        ) from None


def _version(info: dict[str, Any]) -> str | None:
    for field in _VERSION_FIELDS:
        value = info.get(field)
        if isinstance(value, dict):  # the Hub's `lfs: {"sha256": ...}`
            value = value.get("sha256") or value.get("oid")
        if value:
            return f"{field}:{str(value).strip(chr(34))}"
    return None


def _digest(*parts: str) -> str:
    return hashlib.blake2b("\0".join(parts).encode(), digest_size=16).hexdigest()


def _pointer(url: str) -> Path:
    return cache_dir() / "remote" / "urls" / f"{_digest(url)}.json"


def fetch(url: str) -> Path:
    """The local copy of the object at ``url``, downloaded into the cache when its version is new.

    Raises:
        DataError: the object does not exist (``remote_not_found``) or cannot be reached and no
            earlier copy is cached (``remote_unavailable``); the message names the URL and the
            hint what to check.
    """
    fs, path = filesystem(url)
    try:
        info = fs.info(path)
    except FileNotFoundError:
        raise DataError(
            f"no file at {url!r}",
            hint="Check the URL (and the bucket or repository)",
            code="remote_not_found",
        ) from None
    except Exception as exc:  # network, credentials, DNS: each library raises its own types
        cached = _last_copy(url)
        if cached is not None:
            log.warning("cannot reach %s (%s); using the copy fetched before: %s", url, exc, cached)
            return cached
        raise DataError(
            f"cannot reach {url!r}: {type(exc).__name__}: {exc}",
            hint=check_hint(url),
            code="remote_unavailable",
        ) from None
    if info.get("type") == "directory":
        raise DataError(
            f"{url!r} is a folder, not a file", hint="Name one file per URL", code="remote_not_found"
        )
    version = _version(info)
    name = PurePosixPath(path).name or "data"
    if version is None:
        return _fetch_unversioned(fs, path, url, name)
    entry = cache_dir() / "remote" / _digest(url, version) / name
    with build_lock(entry):
        if not entry.exists():
            _download(fs, path, url, entry, info.get("size"))
    _remember(url, entry)
    return entry


def _fetch_unversioned(fs: Any, path: str, url: str, name: str) -> Path:
    """Download again (the server names no version); keep one copy per content hash."""
    scratch = cache_dir() / "remote" / "partial" / _digest(url, str(os.getpid())) / name
    _download(fs, path, url, scratch, None)
    with scratch.open("rb") as f:
        sha = hashlib.file_digest(f, "sha256").hexdigest()
    entry = cache_dir() / "remote" / _digest(url, "sha256:" + sha) / name
    with build_lock(entry):
        if entry.exists():
            scratch.unlink()
        else:
            os.replace(scratch, entry)
    shutil.rmtree(scratch.parent, ignore_errors=True)
    _remember(url, entry)
    return entry


def _download(fs: Any, path: str, url: str, dest: Path, size: int | None) -> None:
    log.info("fetching %s", url)
    try:
        with atomic_write(dest) as tmp:
            with fs.open(path, "rb", block_size=1 << 23) as src, tmp.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 23)
            got = tmp.stat().st_size
            if size is not None and got != size:
                raise OSError(f"got {got:,} bytes, the store reports {size:,}")
    except DataError:
        raise
    except Exception as exc:
        raise download_failed(url, exc) from None


def download_failed(url: str, exc: Exception) -> DataError:
    """The one error for a download from a store that failed (what failed, and what to check)."""
    message = f"cannot download {url!r}: {type(exc).__name__}: {exc}"
    return DataError(message, hint=check_hint(url), code="remote_unavailable")


def _remember(url: str, entry: Path) -> None:
    pointer = _pointer(url)
    with contextlib.suppress(OSError), atomic_write(pointer) as tmp:
        tmp.write_text(json.dumps({"url": url, "path": str(entry)}), encoding="utf-8")


def _last_copy(url: str) -> Path | None:
    try:
        path = Path(json.loads(_pointer(url).read_text(encoding="utf-8"))["path"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return path if path.is_file() else None


def hub_unreachable(timeout: float = 3.0) -> str | None:
    """Why the hub cannot be reached (offline mode, no name resolution, no connection), or None.

    A quick probe, so that a hub id fails in seconds rather than after ``datasets``'s retries."""
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0", "false", "False"):
        return "HF_HUB_OFFLINE is set"
    url = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return f"cannot connect to {host}:{port}: {exc.strerror or exc}"
