"""MCP both ways, with real SDK servers and clients: `type: mcp` tools over stdio and streamable
HTTP, and `envbuilder mcp SPEC` serving an episode to the SDK's client."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from envbuilder import __version__
from envbuilder.environment import Environment, Episode
from envbuilder.errors import SpecError
from envbuilder.protocol import RunToolSuccess
from envbuilder.spec import parse_spec
from tests.agents.conftest import DATA
from tests.servers import free_port

SPEC = """
name: weather
dataset: {type: jsonl, files: {test: tasks.jsonl}}
splits: {test: {type: test}}
prompt: {template: "{{ question }}"}
grader: {type: exact_match, target: "{{ id }}"}
tools:
  - %s
"""


def _env(tool: str) -> Environment:
    return Environment(parse_spec(SPEC % tool, file="weather.yaml", base_dir=DATA))


async def _play(env: Environment) -> None:
    specs = {t.name: t for t in env.tools_listing.tools}
    assert sorted(specs) == ["submit", "w_add", "w_forecast"]
    forecast = specs["w_forecast"]
    assert forecast.description == "The weather forecast for a city."
    assert forecast.input_schema["required"] == ["city"]
    assert forecast.input_schema["properties"]["days"]["default"] == 1
    episode = Episode(task=env.split("test").task(0))
    out = await env.call_tool(episode, "w_forecast", {"city": "Oslo", "days": 2})
    assert isinstance(out, RunToolSuccess) and out.output.blocks[0].text == "Oslo: sunny for 2 days"  # type: ignore[union-attr]
    out = await env.call_tool(episode, "w_add", {"a": 2, "b": 40})
    assert isinstance(out, RunToolSuccess) and out.output.blocks[0].text == "42"  # type: ignore[union-attr]
    bad = await env.call_tool(episode, "w_forecast", {"city": "Atlantis"})
    assert isinstance(bad, RunToolSuccess) and bad.output.metadata
    assert "no forecast for Atlantis" in bad.output.metadata["error"]
    wrong = await env.call_tool(episode, "w_add", {"a": "two"})
    assert isinstance(wrong, RunToolSuccess) and wrong.output.metadata and wrong.output.metadata["error"]
    await env.aclose()


async def test_stdio_server_tools_are_offered_and_called() -> None:
    await _play(_env(f"{{type: mcp, command: [{sys.executable}, mcp_weather.py], prefix: w_}}"))


@pytest.fixture
def http_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(DATA / "mcp_weather.py"), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_streamable_http_server_tools(http_server: str) -> None:
    await _play(_env(f"{{type: mcp, url: '{http_server}', prefix: w_, include: [add, forecast]}}"))


def test_a_server_that_does_not_start_or_lacks_a_tool_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match=r"tools\[0\].command.*cannot list the MCP server's tools"):
        _env(f"{{type: mcp, command: [{sys.executable}, -c, 'import sys; sys.exit(3)'], timeout: 10}}")
    with pytest.raises(SpecError, match="the MCP server has no tool 'rain'"):
        _env(f"{{type: mcp, command: [{sys.executable}, mcp_weather.py], include: [rain]}}")


async def test_the_mcp_door_serves_an_episode_to_the_sdk_client() -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "envbuilder", "mcp", str(DATA / "bank.yaml"), "--index", "0"],
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        started = await session.initialize()
        assert (started.serverInfo.name, started.serverInfo.version) == ("envbuilder-bank", __version__)
        names = [t.name for t in (await session.list_tools()).tools]
        assert names[0] == "send_message" and {"transfer", "unfreeze", "find_account"} <= set(names)
        prompt = await session.get_prompt("task")
        assert prompt.messages[0].content.text.startswith("Move 30 from a1 to a2")  # type: ignore[union-attr]
        resource = await session.read_resource("episode://prompt")  # type: ignore[arg-type]
        assert "Move 30" in resource.contents[0].text  # type: ignore[union-attr]
        refused = await session.call_tool("transfer", {"source": "a1", "target": "a2", "amount": 30})
        assert refused.isError and "frozen" in refused.content[0].text  # type: ignore[union-attr]
        await session.call_tool("unfreeze", {"account": "a2"})
        done = await session.call_tool("transfer", {"source": "a1", "target": "a2", "amount": 30})
        assert not done.isError and done.structuredContent == {
            "reward": None,
            "finished": False,
            "metadata": {},
        }
        last = await session.call_tool("send_message", {"message": "Bob has 35 now."})
        assert last.structuredContent is not None
        assert (last.structuredContent["reward"], last.structuredContent["finished"]) == (1.0, True)
        after = await session.call_tool("add", {})
        assert after.isError
