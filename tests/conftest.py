"""Shared fixtures: the shipped GSM8K environment, a real uvicorn server on a free port."""

from __future__ import annotations

import os
import tempfile

# Tests never reach a hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
# Tests never read or write the user's cache (filters, row indexes, judge replies, packs).
os.environ["ENVBUILDER_CACHE_DIR"] = tempfile.mkdtemp(prefix="envbuilder-tests-")

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuilder.environment import Environment, load_environment
from envbuilder.server import ServerSettings, create_app
from tests.servers import serve_app

ROOT = Path(__file__).resolve().parent.parent
ENVS = ROOT / "envs"
# Tests read only the repository: the data shipped with envs/ and the slices in tests/fixtures/
# (sources and licences in tests/fixtures/SOURCES.md).
DATA = ENVS / "data"
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="session")
def hub_gsm8k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GSM8K laid out like the hub repo `openai/gsm8k` (config `main`), at `<tmp>/hf/openai__gsm8k`."""
    folder = tmp_path_factory.mktemp("hub") / "hf" / "openai__gsm8k"
    shutil.copytree(FIXTURES / "hf" / "openai__gsm8k", folder)
    (folder / "main").mkdir()
    for path in (DATA / "gsm8k").glob("*.parquet"):
        shutil.copyfile(path, folder / "main" / path.name)
    return folder


@pytest.fixture(scope="session")
def gsm8k() -> Environment:
    return load_environment(ENVS / "gsm8k.yaml")


@pytest.fixture(scope="session")
def gsm8k_url(gsm8k: Environment) -> Iterator[str]:
    """A real uvicorn server serving envs/gsm8k.yaml (short ping interval for the SSE tests)."""
    app = create_app([gsm8k], ServerSettings(ping_interval=0.2))
    with serve_app(app) as url:
        yield url
