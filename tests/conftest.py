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

from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuilder.environment import Environment, load_environment
from envbuilder.server import ServerSettings, create_app
from tests.redisd import RedisServer, redis_server
from tests.servers import serve_app

ROOT = Path(__file__).resolve().parent.parent
ENVS = ROOT / "envs"
SHARED_DATA = ROOT.parent / "shared" / "data"
if not SHARED_DATA.is_dir() and os.environ.get("ENVBUILDER_SHARED_DATA"):
    # A git worktree sits one level deeper than a CI clone: point at shared/data explicitly.
    SHARED_DATA = Path(os.environ["ENVBUILDER_SHARED_DATA"])


@pytest.fixture(scope="session")
def gsm8k() -> Environment:
    return load_environment(ENVS / "gsm8k.yaml")


@pytest.fixture(scope="session")
def gsm8k_url(gsm8k: Environment) -> Iterator[str]:
    """A real uvicorn server serving envs/gsm8k.yaml (short ping interval for the SSE tests)."""
    app = create_app([gsm8k], ServerSettings(ping_interval=0.2))
    with serve_app(app) as url:
        yield url


@pytest.fixture(scope="session")
def redis_session() -> Iterator[RedisServer]:
    """One real redis-server for the test session (skipped where it is not installed)."""
    with redis_server() as server:
        yield server


@pytest.fixture
def redis_url(redis_session: RedisServer) -> str:
    """An empty Redis database for one test."""
    if redis_session.process is None:  # a test stopped it to simulate an outage
        redis_session.start()
    redis_session.flush()
    return redis_session.url
