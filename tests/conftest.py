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

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from envbuilder.environment import Environment, load_environment
from envbuilder.server import ServerSettings, create_app
from tests.redisd import RedisServer, redis_server
from tests.servers import serve_app

ROOT = Path(__file__).resolve().parent.parent
ENVS = ROOT / "envs"
# Tests read only the repository: the data shipped with envs/ and the slices in tests/fixtures/
# (sources and licences in tests/fixtures/SOURCES.md).
DATA = ENVS / "data"
FIXTURES = ROOT / "tests" / "fixtures"
# Fixtures are data, not tests: a Harbor task's own `tests/test_outputs.py` runs in its container.
collect_ignore = ["fixtures"]


@pytest.fixture(autouse=True)
def _envbuilder_variables_restored() -> Iterator[None]:
    """A command run in process (`CliRunner`) sets variables for the rest of its process, as it
    should: `serve --user-base-url` hands the endpoint to its workers through
    `ENVBUILDER_USER_BASE_URL`. In the test process they would outlive the test and point later
    tests' simulated users at a chat server that is gone: each test gets the `ENVBUILDER_*`
    variables it started with."""
    before = {k: v for k, v in os.environ.items() if k.startswith("ENVBUILDER_")}
    yield
    for key in [k for k in os.environ if k.startswith("ENVBUILDER_") and k not in before]:
        del os.environ[key]
    os.environ.update(before)


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


_JUDGED = """\
name: judged
dataset:
  type: parquet
  files: {test: %s}
splits: {test: {}}
prompt: {template: "{{ question }}"}
grader:
  type: llm_judge
  base_url: %s
  model: judge-1
  question: "{{ question }}"
  reference: %s
"""


def judged_spec(
    base_url: str,
    *,
    data: str | Path = "data/gsm8k/test-00000-of-00001.parquet",
    reference: str = "{{ answer.split('####')[-1] }}",
    **grader: object,
) -> str:
    """The judged spec several tests serve: GSM8K's test split (``data`` relative to envs/, or
    absolute), graded by the LLM judge at ``base_url`` against ``reference``; ``grader`` adds
    keys to the grader block (``api_key_secret="JUDGE_KEY"``, ``cache=False``)."""
    extra = "".join(f"  {key}: {json.dumps(value)}\n" for key, value in grader.items())
    return _JUDGED % (json.dumps(str(data)), base_url, json.dumps(reference)) + extra


@pytest.fixture
def judged() -> Callable[..., str]:
    """:func:`judged_spec`, for tests that serve a judged environment."""
    return judged_spec


# -- no silent skips in CI ----------------------------------------------------------------------

CI_MAY_SKIP = ("gcsfs is installed",)
"""The only skip CI always allows: a test of the message for a package that happens to be present."""

NEEDS_PYTHON312 = "needs a Python 3.12"
"""Said by every test that runs a harness in a Python 3.12 of its own (nemo-gym, harbor). CI allows
those skips only where ``.ci/run`` found no Python 3.12 on the machine and said so, by setting
``ENVBUILDER_CI_NO_PYTHON312``; where it found one, a missing harness is a broken install."""


def _ci_allows(reason: str) -> bool:
    if any(allowed in reason for allowed in CI_MAY_SKIP):
        return True
    return NEEDS_PYTHON312 in reason and bool(os.environ.get("ENVBUILDER_CI_NO_PYTHON312"))


def _ci_fails_skip(report: pytest.CollectReport | pytest.TestReport) -> None:
    """Under CI (``.ci/run`` sets ``CI``), where every dev dependency and system package is
    installed, a skip (``importorskip`` included) is a failure: it would hide a broken install."""
    if not report.skipped or not os.environ.get("CI") or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = str(longrepr[-1]) if isinstance(longrepr, tuple) else str(longrepr)
    if not _ci_allows(reason):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, where everything a test needs is installed: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    _ci_fails_skip(outcome.get_result())  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    _ci_fails_skip(outcome.get_result())  # type: ignore[attr-defined]
