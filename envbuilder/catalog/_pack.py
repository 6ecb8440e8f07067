"""Packs: a spec, its data and a lock of sha256 hashes in one zip, served elsewhere exactly as published.

A pack holds ``Environment.files`` (every file loading the spec read) under their paths relative to the
common folder of them all, plus ``envbuilder.lock.json``::

    {"format": 1, "name": ..., "version": ..., "spec": "gsm8k.yaml",
     "content_hash": "sha256:...", "files": {"gsm8k.yaml": "<sha256>", ...}}

Serving a pack extracts it once into a cache folder named after the pack's own hash and checks
every file against the lock, every time: a changed byte in the pack or in the cache is refused.
Packs are reproducible: the same files give the same zip bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from envbuilder import paths
from envbuilder._version import __version__
from envbuilder.catalog._binding import check_spec
from envbuilder.catalog._files import content_hash, file_sha256
from envbuilder.environment import Environment, load_environment
from envbuilder.errors import DataError
from envbuilder.spec import load_spec

__all__ = [
    "LOCK_NAME",
    "UNREADABLE",
    "PackInfo",
    "is_pack",
    "load_pack",
    "open_pack",
    "pack",
    "safe_entries",
]

LOCK_NAME = paths.PACK_LOCK_NAME
_FORMAT = 1
_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed timestamps keep packs reproducible


@dataclass(frozen=True)
class PackInfo:
    """What :func:`pack` wrote."""

    path: Path
    name: str
    content_hash: str
    files: int
    bytes: int


def is_pack(path: Path) -> bool:
    """Whether ``path`` names a pack (``.zip``) rather than a spec or a folder."""
    return path.suffix.lower() == ".zip"


def pack(spec: Path, out: Path, *, trust_code: bool | None = None) -> PackInfo:
    """Bundle the environment of ``spec`` into the zip ``out``; checks the pack serves before returning.

    ``trust_code``: whether the spec's own code may run while it is loaded (see
    :class:`~envbuilder.environment.Environment`; by default only from the user's own folders).

    Raises:
        SpecError: the spec does not load.
        DataError: the spec reads a file the pack cannot carry (``code="pack_unportable"``).
    """
    if not is_pack(out):
        raise DataError(
            f"a pack is a .zip file, not {str(out)!r}", hint="Use --out NAME.zip", code="pack_name"
        )
    env = load_environment(spec, trust_code=trust_code)
    files = env.files
    spec_file = env.loaded.path.resolve() if env.loaded.path is not None else None
    assert spec_file is not None  # load_environment reads a file
    # Lay files out as the spec sees them (a shipped template goes beside the spec, where it is
    # found first), under the deepest folder that holds them all (data may sit in `../data`).
    at = {name: Path(os.path.normpath(spec_file.parent / name)) for name in files}
    root = Path(os.path.commonpath([spec_file.parent, *(p.parent for p in at.values())]))
    members = {at[name].relative_to(root).as_posix(): files[name] for name in files}
    digests = {name: file_sha256(path) for name, path in files.items()}
    lock = {
        "format": _FORMAT,
        "envbuilder": __version__,
        "name": env.name,
        "version": env.spec.version,
        "spec": spec_file.relative_to(root).as_posix(),
        "content_hash": content_hash(digests),
        "files": {name: file_sha256(path) for name, path in sorted(members.items())},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    with zipfile.ZipFile(tmp, "w") as zf:
        with zf.open(_info(LOCK_NAME), "w") as dst:
            dst.write(json.dumps(lock, indent=2).encode() + b"\n")
        for name, path in sorted(members.items()):
            big = path.stat().st_size > (1 << 31)
            with path.open("rb") as src, zf.open(_info(name), "w", force_zip64=big) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            # What the receiving side will do (the code it holds already ran here, from `spec`).
            load_pack(tmp, cache_dir=Path(scratch), trust_code=True)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(out)
    size = sum(p.stat().st_size for p in members.values())
    return PackInfo(out, env.name, str(lock["content_hash"]), len(members), size)


def _info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info


def load_pack(path: Path, *, cache_dir: Path | None = None, trust_code: bool = False) -> Environment:
    """The environment of the pack at ``path``, checked to read only the pack's files.

    A pack is not the user's own folder: its code (``function`` modules, ``mcp`` commands) runs
    only with ``trust_code=True`` (``--trust-code``, or a signature checked with a trusted key).

    Raises:
        DataError: see :func:`open_pack`; also ``pack_unportable`` when the spec reads a file
            outside the pack (an absolute path) so it would not serve what was published, and
            ``pack_mismatch`` when the spec's name or version is not the lock's.
        SpecError: the packed spec does not load here (e.g. a grader plugin is missing), or it
            holds code and ``trust_code`` is False (``code_not_trusted``, nothing imported).
    """
    folder, lock = _open(path, cache_dir)
    loaded = load_spec(folder / lock["spec"])
    check_spec(loaded.spec, lock, path)  # before anything is built from it
    env = Environment(loaded, trust_code=trust_code)
    files = env.files
    for file in files.values():
        if not file.is_relative_to(folder.resolve()):
            raise DataError(
                f"the packed spec reads {str(file)!r}, outside the pack",
                hint="Write data paths relative to the spec file, then pack again",
                code="pack_unportable",
            )
    got = content_hash({name: file_sha256(file) for name, file in files.items()})
    if got != lock["content_hash"]:
        raise DataError(
            f"pack {str(path)!r}: the environment hashes to {got}, its lock says {lock['content_hash']}",
            hint="The pack was changed after it was made; get it again",
            code="pack_mismatch",
        )
    return env


def open_pack(path: Path, *, cache_dir: Path | None = None, lock: bytes | None = None) -> Path:
    """Extract the pack at ``path`` into the cache (once), verify every file, return the spec's path.

    Args:
        lock: The lock bytes a signature was checked over: the extracted lock, which every
            file is then checked against, must be exactly these bytes.

    Raises:
        DataError: the pack is unreadable or malformed (``pack_invalid``), or a file differs
            from its lock entry (``pack_mismatch``).
    """
    folder, info = _open(path, cache_dir)
    if lock is not None and (folder / LOCK_NAME).read_bytes() != lock:
        raise DataError(
            f"pack {str(path)!r}: the lock it extracts is not the lock that was signed",
            hint="The pack was tampered with; get it again from its publisher",
            code="pack_mismatch",
        )
    return folder / info["spec"]


def _open(path: Path, cache_dir: Path | None) -> tuple[Path, dict[str, str]]:
    try:
        key = file_sha256(path)
    except OSError as exc:
        raise DataError(f"cannot read pack {str(path)!r}: {exc.strerror}", code="pack_invalid") from None
    packs = (cache_dir or paths.cache_dir()) / "packs"
    target = packs / key[:32]
    if not target.is_dir():
        packs.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".extract-", dir=packs))
        try:
            _extract(path, scratch)
            _verify(path, scratch)
            scratch.rename(target)
        except OSError:
            if not target.is_dir():  # another process won the race: use its copy
                raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return target, _verify(path, target)


#: What reading a damaged zip raises (a bad header, truncated or corrupt deflate data, a bad offset).
UNREADABLE = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    NotImplementedError,
    zlib.error,
    EOFError,
    struct.error,
    ValueError,
)

MAX_BYTES_ENV = "ENVBUILDER_MAX_PACK_BYTES"
MAX_BYTES = 4 << 30
"""Most bytes a pack may expand to (``$ENVBUILDER_MAX_PACK_BYTES`` overrides)."""
MAX_RATIO = 100
"""Most a pack may expand relative to its compressed size, once it expands past
:data:`RATIO_FLOOR` (Parquet barely compresses; text ~5-10 times; a zip bomb ~1000 times)."""
RATIO_FLOOR = 16 << 20
MAX_ENTRIES = 100_000


def _max_bytes() -> int:
    configured = os.environ.get(MAX_BYTES_ENV, "")
    return int(configured) if configured.isdigit() else MAX_BYTES


def safe_entries(zf: zipfile.ZipFile, path: Path) -> list[zipfile.ZipInfo]:
    """The file entries of the pack ``zf``, checked before a byte is extracted: one entry per
    name, every name normalised and inside the pack, no links or special files, and the
    expanded size and ratio within bounds.

    Raises:
        DataError: ``pack_invalid``, naming the first bad entry.
    """

    def bad(what: str) -> DataError:
        return DataError(f"pack {str(path)!r} {what}; refusing to extract it", code="pack_invalid")

    infos = zf.infolist()
    if len(infos) > MAX_ENTRIES:
        raise bad(f"has {len(infos):,} entries (at most {MAX_ENTRIES:,})")
    seen: set[str] = set()
    files = []
    total = compressed = 0
    for info in infos:
        name = info.filename
        parts = name.rstrip("/").split("/") if info.is_dir() else name.split("/")
        if (
            not name
            or "\\" in name
            or "\x00" in name
            or name.startswith("/")
            or any(part in ("", ".", "..") for part in parts)
            or PurePosixPath(name).is_absolute()
        ):
            raise bad(f"holds an unsafe path {name!r} (absolute, outside the pack or not normalised)")
        key = "/".join(parts).casefold()
        if key in seen:
            raise bad(f"holds {name!r} twice")
        seen.add(key)
        if stat.S_IFMT(info.external_attr >> 16) not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise bad(f"holds a link or special file {name!r}")
        if info.flag_bits & 0x1:
            raise bad(f"holds an encrypted entry {name!r}")
        if info.is_dir():
            continue
        total += info.file_size
        compressed += info.compress_size
        files.append(info)
    limit = _max_bytes()
    if total > limit:
        raise bad(f"expands to {total:,} bytes (at most {limit:,}; set ${MAX_BYTES_ENV} to raise it)")
    if total > RATIO_FLOOR and total > MAX_RATIO * max(compressed, 1):
        raise bad(f"expands {total // max(compressed, 1):,} times (at most {MAX_RATIO}; a zip bomb?)")
    return files


def _extract(path: Path, dest: Path) -> None:
    try:
        with zipfile.ZipFile(path) as zf:
            for info in safe_entries(zf, path):
                out = dest.joinpath(*info.filename.split("/"))
                out.parent.mkdir(parents=True, exist_ok=True)
                # ZipExtFile stops at the declared size (checked above) and checks the CRC.
                with zf.open(info) as src, out.open("xb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
    except UNREADABLE as exc:
        raise DataError(f"{str(path)!r} is not a readable pack: {exc}", code="pack_invalid") from None
    except OSError as exc:  # a corrupt offset, or two entries that cannot both be files
        raise DataError(
            f"cannot extract the pack {str(path)!r}: {exc.strerror or exc}", code="pack_invalid"
        ) from None


def _verify(path: Path, folder: Path) -> dict[str, str]:
    """Check the extracted ``folder`` against its lock: same files, same hashes."""
    try:
        lock = json.loads((folder / LOCK_NAME).read_text(encoding="utf-8"))
        files: dict[str, str] = lock["files"]
        spec: str = lock["spec"]
        if lock.get("format") != _FORMAT or not isinstance(files, dict) or spec not in files:
            raise ValueError("unexpected format")
        named, version = lock["name"], lock["version"]
        if not isinstance(named, str) or not isinstance(version, str):
            raise ValueError("`name` and `version` must be strings")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DataError(
            f"pack {str(path)!r} has no valid {LOCK_NAME}: {exc}",
            hint="Make packs with `envbuilder pack SPEC --out FILE.zip`",
            code="pack_invalid",
        ) from None
    present = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {LOCK_NAME}
    problems = [f"{name}: not in the lock" for name in sorted(present - set(files))]
    problems += [f"{name}: missing" for name in sorted(set(files) - present)]
    for name in sorted(set(files) & present):
        got = file_sha256(folder / name)
        if got != files[name]:
            problems.append(f"{name}: sha256 {got[:16]}…, the lock says {files[name][:16]}…")
    if problems:
        raise DataError(
            f"pack {str(path)!r} does not match its lock, refusing to serve it:\n  " + "\n  ".join(problems),
            hint="The pack or its extracted copy in the cache was changed; get the pack again",
            code="pack_mismatch",
        )
    return {"spec": spec, "content_hash": str(lock.get("content_hash")), "name": named, "version": version}
