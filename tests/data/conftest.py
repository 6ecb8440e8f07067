"""Data tests write their caches (row indexes, filter results) into a temporary folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("ENVBUILDER_CACHE_DIR", str(path))
    yield path
