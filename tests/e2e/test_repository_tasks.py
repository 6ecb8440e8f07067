"""End to end: ``envbuilder serve envs/swe_tomli.yaml`` (a real uvicorn server in its own
process, a real engine) with both reference clients: tools in the session's container, gold
and empty patches graded, and no container left behind by a deleted session, a shut-down
server, or a server killed with SIGKILL (the next one of the same id reaps it)."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from envbuilder.environment import Environment, load_environment
from envbuilder.isolation.sandbox._engine import Engine, EngineAddress
from tests.processes import serve_process
from tests.sandboxes import needs_base_image, wait_for

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "envs" / "swe_tomli.yaml")


@pytest.fixture(scope="module")
def swe() -> Environment:
    needs_base_image()
    return load_environment(SPEC)


@pytest.fixture
def server_id() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def served(swe: Environment, server_id: str) -> Iterator[tuple[str, str]]:
    with serve_process(SPEC, env={"ENVBUILDER_SERVER_ID": server_id}) as (url, _):
        yield url, server_id
    assert wait_for(lambda: not _containers(server_id))  # shutdown removed them


def _containers(server: str) -> list[str]:
    async def query() -> list[str]:
        async with Engine(EngineAddress.from_env()).connect() as api:
            found = await api.containers(
                {"envbuilder.isolation.sandbox": "session", "envbuilder.server": server}
            )
        return [str(c["Id"]) for c in found]

    return asyncio.run(query())


def test_ors_sdk_fixes_a_bug_in_the_container(served: tuple[str, str], swe: Environment) -> None:
    from ors.client import ORS

    url, server = served
    task = swe.split("test").task(0)
    with ORS(base_url=url) as client:
        env = client.environment("swe_tomli")
        assert {t.name for t in env.list_tools()} >= {"submit", "bash", "python", "read_file", "edit_file"}
        public = env.get_task("test", 0).task_spec
        assert "patch" not in public and "test_patch" not in public and "FAIL_TO_PASS" not in public
        with env.session(split="test", index=0) as s:
            assert "TOMLDecodeError" in s.get_prompt()[0].text
            out = s.call_tool("bash", {"code": "git log --format=%s --all; ls tests | head -3"})
            assert out.blocks[0].text.splitlines()[0] == "base"
            assert len(_containers(server)) == 1
            health = httpx.get(f"{url}/health").json()
            assert health["containers"]["swe_tomli"]["live"] == 1
            out = s.call_tool(
                "edit_file",
                {
                    "path": "tomli/__init__.py",
                    "old_text": "from tomli._parser import TOMLDecodeError, load, loads\n",
                    "new_text": "from tomli._parser import TOMLDecodeError, load, loads\n"
                    'TOMLDecodeError.__module__ = "tomli"\n',
                },
            )
            out = s.call_tool("submit", {"answer": ""})
            assert (out.reward, out.finished) == (1.0, True)
            assert out.metadata["tests"] == dict.fromkeys(
                [*task["FAIL_TO_PASS"], *task["PASS_TO_PASS"]], "passed"
            )
    assert wait_for(lambda: not _containers(server))  # the deleted session's container went with it


def test_openreward_gold_and_empty_patches(served: tuple[str, str], swe: Environment) -> None:
    from openreward import EnvironmentsAPI

    url, _ = served
    api = EnvironmentsAPI(base_url=url, api_key=None)
    env = api.get(name="swe_tomli", variant="swe_tomli")
    gold = swe.split("test").task(1)["patch"]
    with env.session(split="test", index=1) as s:
        out = s.call_tool("submit", {"answer": gold})
        assert (out.reward, out.finished) == (1.0, True)
        assert out.metadata["fail_to_pass"] == {"passed": 1, "total": 1}
    with env.session(split="test", index=1) as s:
        s.call_tool("bash", {"code": "echo nothing to fix > notes.txt"})
        out = s.call_tool("submit", {"answer": ""})
        assert (out.reward, out.finished) == (0.0, True)
        assert out.metadata["fail_to_pass"] == {"passed": 0, "total": 1}


def test_a_server_killed_with_sigkill_leaves_containers_the_next_one_reaps(
    swe: Environment, server_id: str
) -> None:
    from ors.client import ORS

    with (
        serve_process(SPEC, env={"ENVBUILDER_SERVER_ID": server_id}) as (url, process),
        ORS(base_url=url) as client,
    ):
        session = client.environment("swe_tomli").session(split="test", index=0)
        session.__enter__()  # (never left: the server dies under it)
        session.call_tool("bash", {"code": "true"})
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    left = _containers(server_id)
    assert len(left) == 1  # the crash left it
    with serve_process(SPEC, env={"ENVBUILDER_SERVER_ID": server_id}) as (url, _):
        assert wait_for(lambda: not _containers(server_id))
        assert httpx.get(f"{url}/health").json()["containers"]["swe_tomli"]["reaped"] == 1
