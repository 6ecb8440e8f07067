"""Grader tests never touch ~/.cache: the judge cache goes to a fresh folder per test."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ENVBUILDER_CACHE_DIR", str(folder))
    return folder
