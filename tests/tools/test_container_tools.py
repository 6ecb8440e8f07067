"""The tools of a spec's `sandbox:` on a real engine: bash, python and the file tools run in
the session's container, keep its state between calls, and the container goes with the session."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from envbuilder.environment import Environment, load_environment
from envbuilder.episode import Episode
from envbuilder.isolation.sandbox._engine import Engine, EngineAddress
from envbuilder.protocol import RunToolSuccess
from tests.sandboxes import needs_base_image

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def swe() -> Environment:
    needs_base_image()
    return load_environment(ROOT / "envs" / "swe_tomli.yaml")


def _call(env: Environment, episode: Episode, name: str, **args: Any) -> str:
    result = asyncio.run(env.call_tool(episode, name, args))
    assert isinstance(result, RunToolSuccess), result
    return "".join(getattr(b, "text", "") for b in result.output.blocks)


async def _exists(name: str) -> bool:
    async with Engine(EngineAddress.from_env()).connect() as api:
        return await api.request("GET", f"/containers/{name}/json", missing_ok=True) is not None


def test_state_is_kept_between_calls_and_the_container_goes_with_the_session(swe: Environment) -> None:
    episode = Episode(task=swe.split("test").task(0))
    try:
        assert "uid=65534" in _call(swe, episode, "bash", code="id; pwd")
        assert episode.sandbox is not None and episode.sandbox.startswith("envb-")
        # the working folder, files and the shell's folder stay from call to call
        _call(swe, episode, "bash", code="cd tomli && echo kept > note.txt")
        assert _call(swe, episode, "bash", code="pwd; cat note.txt").split() == ["/testbed/tomli", "kept"]
        assert _call(swe, episode, "python", code="print(open('note.txt').read().strip())") == "kept"
        # the repository is at its base commit, with no history, remote or reflog
        assert _call(swe, episode, "bash", code="git rev-list --all | wc -l").strip() == "1"
        refs = _call(swe, episode, "bash", code="git remote; git stash list; git reflog | wc -l")
        assert refs.strip() == "1"
        log = _call(swe, episode, "bash", code="git log --all --format=%s")
        assert log.strip() == "base"
    finally:
        name = episode.sandbox
        asyncio.run(swe.end_session(episode))
    assert name is not None and not asyncio.run(_exists(name))


def test_file_tools_read_write_and_edit_as_agents_expect(swe: Environment) -> None:
    episode = Episode(task=swe.split("test").task(0))
    try:
        wrote = _call(swe, episode, "write_file", path="pkg/mod.py", content="a = 1\nb = 2\nc = 3\n")
        assert wrote.startswith("wrote pkg/mod.py")
        assert _call(swe, episode, "read_file", path="/testbed/pkg/mod.py", start_line=2, end_line=3) == (
            "     2\tb = 2\n     3\tc = 3"
        )
        _call(swe, episode, "edit_file", path="pkg/mod.py", old_text="b = 2", new_text="b = 20")
        _call(swe, episode, "edit_file", path="pkg/mod.py", start_line=3, end_line=3, new_text="c = 30")
        assert _call(swe, episode, "bash", code="cat pkg/mod.py") == "a = 1\nb = 20\nc = 30"
        missing = _call(swe, episode, "edit_file", path="pkg/mod.py", old_text="zzz", new_text="y")
        assert "does not occur" in missing
        _call(swe, episode, "write_file", path="pkg/two.py", content="x\nx\n")
        twice = _call(swe, episode, "edit_file", path="pkg/two.py", old_text="x", new_text="y")
        assert "occurs 2 times" in twice
        # the file tools have the agent's permissions, no more
        assert "Permission denied" in _call(swe, episode, "read_file", path="/etc/shadow")
        assert "Permission denied" in _call(swe, episode, "write_file", path="/usr/lib/x.py", content="")
    finally:
        asyncio.run(swe.end_session(episode))


def test_no_network_and_a_call_past_its_time_is_killed(swe: Environment) -> None:
    episode = Episode(task=swe.split("test").task(0))
    try:
        out = _call(
            swe,
            episode,
            "python",
            code="import socket\ntry:\n    socket.create_connection(('1.1.1.1', 80), timeout=3)\n"
            "    print('connected')\nexcept OSError as exc:\n    print('no network', exc)",
        )
        assert out.startswith("no network")
        # a process left in the background lives on (the session's state) ...
        _call(swe, episode, "bash", code="sleep 997 >/dev/null 2>&1 &")
        procs = "for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline; echo; done"
        assert "sleep 997" in _call(swe, episode, "bash", code=procs)
        # ... while a call past its wall time is killed with its process group
        assert swe.containers is not None and episode.sandbox is not None
        result = asyncio.run(
            swe.containers.exec(episode.sandbox, ["bash", "-c", "sleep 998 & sleep 999"], timeout=1)
        )
        assert result.status.value == "timeout"
        left = _call(swe, episode, "bash", code=procs)
        assert "sleep 998" not in left and "sleep 999" not in left and "sleep 997" in left
    finally:
        asyncio.run(swe.end_session(episode))
