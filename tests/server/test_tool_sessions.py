"""A tool's per-session state lives in the session, and the tool is told when the session ends:
on /delete and when the reaper expires an idle session (real uvicorn)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

import httpx

from envbuilder.environment import Environment
from envbuilder.episode.toolbox import Toolbox
from envbuilder.server import ServerSettings, create_app
from envbuilder.spec import parse_spec
from envbuilder.tools import Tool, ToolCall, ToolConfig, ToolContext, ToolReply
from tests.servers import serve_app
from tests.tools.conftest import HERE, SPEC


class ProbeConfig(ToolConfig):
    type: Literal["probe"]


class ProbeTool(Tool):
    """Opens a 'resource' per session (a handle in its state) and records its release."""

    Config = ProbeConfig
    description = "Open a resource."
    blocking = True

    def __init__(self, config: ProbeConfig, context: ToolContext):
        super().__init__(config, context)
        self.released: list[dict[str, Any]] = []

    async def run(self, call: ToolCall) -> ToolReply:
        call.state.setdefault("handle", f"res-{len(self.released)}")
        call.state["uses"] = call.state.get("uses", 0) + 1
        await asyncio.sleep(0)
        return ToolReply.text(f"{call.state['handle']} used {call.state['uses']} times")

    async def end_session(self, state: dict[str, Any]) -> None:
        self.released.append(dict(state))


def _env() -> tuple[Environment, ProbeTool]:
    env = Environment(parse_spec(SPEC, file="qa.yaml", base_dir=HERE))
    probe = ProbeTool(ProbeConfig(type="probe"), ToolContext())
    env.toolbox = Toolbox(env.toolbox.submit, [probe])
    env.tools_listing, env.task_tools_listing = env.toolbox.listing, env.toolbox.task_listing
    return env, probe


def _create(c: httpx.Client, sid: str) -> None:
    r = c.post("/create", headers={"X-Session-ID": sid}, json={"split": "test", "index": 0})
    assert r.status_code == 200, r.text


def _call(c: httpx.Client, sid: str) -> str:
    r = c.post("/qa-tools/call", headers={"X-Session-ID": sid}, json={"name": "probe", "input": {}})
    assert r.status_code == 200
    return r.text


def test_delete_and_expiry_end_the_tools_sessions() -> None:
    env, probe = _env()
    settings = ServerSettings(session_timeout=0.5, reap_interval=0.05, ping_interval=0.2)
    with serve_app(create_app([env], settings)) as url, httpx.Client(base_url=url, timeout=10) as c:
        assert [t["name"] for t in c.get("/qa-tools/tools").json()["tools"]] == ["submit", "probe"]
        _create(c, "one")
        _call(c, "one")
        assert "res-0 used 2 times" in _call(c, "one")
        _create(c, "untouched")  # never called the tool: nothing to release
        assert c.post("/delete", headers={"X-Session-ID": "one"}).status_code == 200
        deadline = time.monotonic() + 5
        while not probe.released and time.monotonic() < deadline:
            time.sleep(0.02)
        assert probe.released == [{"handle": "res-0", "uses": 2}]
        _create(c, "idle")
        _call(c, "idle")
        deadline = time.monotonic() + 5
        while len(probe.released) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert probe.released == [{"handle": "res-0", "uses": 2}, {"handle": "res-1", "uses": 1}]


def test_task_tools_follow_the_sessions_task() -> None:
    text = SPEC + "  - {type: template, name: note, input: {}, template: '{{ note }}', only_for: note}\n"
    env = Environment(parse_spec(text, file="qa.yaml", base_dir=HERE))
    with serve_app(create_app([env])) as url, httpx.Client(base_url=url, timeout=10) as c:
        names = {}
        for index in (0, 1):
            sid = f"s{index}"
            r = c.post("/create", headers={"X-Session-ID": sid}, json={"split": "test", "index": index})
            assert r.status_code == 200
            listing = c.get("/qa-tools/task_tools", headers={"X-Session-ID": sid}).json()
            names[index] = [t["name"] for t in listing["tools"]]
        assert names[0][-1] == "note" and "note" not in names[1]
        assert "note" not in [t["name"] for t in c.get("/qa-tools/tools").json()["tools"]]
