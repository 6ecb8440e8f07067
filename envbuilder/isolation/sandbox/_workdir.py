"""A session's kept folder on its way into a run (a tar of it) and back (kept only when it fits).

Both backends copy the host folder into the run's size-limited ``/work`` before the code runs
and send ``/work`` back as a tar once every process of the run is gone, so the quota holds
while the code runs and the host folder only ever receives what fit.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path


def pack(folder: Path | None, files: Mapping[str, bytes], *, uid: int, limit: int) -> bytes:
    """``folder``'s regular files and folders (no links), then ``files`` (plain names, which
    win), as a tar owned by ``uid``; files past ``limit`` bytes in all are left out (the
    folder held no more than the run may write, unless it was changed behind the server)."""
    buf = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        if folder is not None:
            for dirpath, dirnames, filenames in os.walk(folder):
                base = Path(dirpath)
                for name in sorted(dirnames):
                    path = base / name
                    if not path.is_symlink():
                        tar.addfile(
                            _info(path.relative_to(folder).as_posix(), tarfile.DIRTYPE, 0, 0o755, uid)
                        )
                dirnames[:] = [d for d in dirnames if not (base / d).is_symlink()]
                for name in sorted(filenames):
                    path = base / name
                    if name in files and base == folder:
                        continue  # replaced below
                    try:
                        stat = path.lstat()
                        if not path.is_file() or path.is_symlink() or total + stat.st_size > limit:
                            continue
                        with path.open("rb") as f:
                            data = f.read(limit - total + 1)
                    except OSError:
                        continue
                    if total + len(data) > limit:
                        continue
                    total += len(data)
                    info = _info(path.relative_to(folder).as_posix(), tarfile.REGTYPE, len(data), 0o644, uid)
                    info.mode = stat.st_mode & 0o755 | 0o600
                    tar.addfile(info, io.BytesIO(data))
        for name, data in files.items():
            tar.addfile(_info(name, tarfile.REGTYPE, len(data), 0o644, uid), io.BytesIO(data))
    return buf.getvalue()


def _info(name: str, kind: bytes, size: int, mode: int, uid: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode, info.uid, info.gid = kind, size, mode, uid, uid
    return info


def restore(workdir: Path, data: bytes, limit: int) -> None:
    """Make ``workdir`` hold what the run left in ``/work`` (a tar, at most ``limit`` bytes of
    files, regular files and folders only); when it is not that, keep the folder as it was."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
            if sum(m.size for m in members) > limit:
                return
            staging = Path(tempfile.mkdtemp(prefix=".restore-", dir=workdir.parent))
            try:
                tar.extractall(staging, members=members, filter="data")
                for child in list(workdir.iterdir()):
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
                for child in staging.iterdir():
                    child.rename(workdir / child.name)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except (tarfile.TarError, OSError, ValueError):
        return
