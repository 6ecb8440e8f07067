"""The on-disk cache: files appear atomically; temporaries of dead writers are cleaned up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from envbuilder.data._cache import atomic_write


def test_atomic_write_and_abandoned_temporaries(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    abandoned = tmp_path / f".rows.arrow.{dead.stdout.strip()}.tmp"
    abandoned.write_bytes(b"partial")
    target = tmp_path / "rows.arrow"
    with atomic_write(target) as tmp:
        tmp.write_bytes(b"done")
        assert not target.exists()
    assert target.read_bytes() == b"done"
    assert not abandoned.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.arrow"]
