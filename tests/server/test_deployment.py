"""``X-Deployment`` routing: a bare path or a bare ``/create`` goes to the environment the header
names (``name`` or ``owner/name``), an unknown name is a 404 listing the served ones, and only a
request naming nothing is redirected to the default environment. Both doors, and the openreward
client used without a variant (which names the environment only in that header)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment, load_environment
from envbuilder.server import ServerSettings, create_app
from tests.conftest import ENVS
from tests.servers import serve_app


@pytest.fixture(scope="module")
def three(gsm8k: Environment) -> list[Environment]:
    """digits (the default: first, as `serve envs/` orders it), gsm8k and gsm8k-tools."""
    return [load_environment(ENVS / "digits.yaml"), gsm8k, load_environment(ENVS / "gsm8k_tools.yaml")]


@pytest.fixture(params=["fast", "fastapi"])
def call(request: pytest.FixtureRequest, three: list[Environment]) -> Iterator[Any]:
    """A request function against one door of a three-environment app."""
    app = create_app(three, ServerSettings())
    app.front.fast = request.param == "fast"
    loop = asyncio.new_event_loop()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")

    def send(method: str, path: str, **kwargs: Any) -> httpx.Response:
        return loop.run_until_complete(client.request(method, path, **kwargs))

    yield send
    loop.run_until_complete(client.aclose())
    loop.close()


def test_bare_discovery_routed_by_name(call: Any) -> None:
    for name in ("gsm8k", "GSM8K", "openai/gsm8k", " gsm8k "):
        h = {"X-Deployment": name}
        r = call("POST", "/task_range", headers=h, json={"split": "test", "start": 0, "stop": 2})
        assert r.status_code == 200, (name, r.text)
        assert r.json()["env_name"] == "gsm8k"
        assert [t["id"] for t in r.json()["tasks"]] == ["test-0", "test-1"]
        assert "question" in r.json()["tasks"][0] and "image" not in r.json()["tasks"][0]
    r = call("GET", "/tools", headers={"X-Deployment": "owner/gsm8k-tools"})
    assert sorted(t["name"] for t in r.json()["tools"]) == ["calculator", "hint", "submit"]
    r = call("POST", "/num_tasks", headers={"X-Deployment": "gsm8k"}, json={"split": "train"})
    assert r.json() == {"num_tasks": 7473}


def test_unknown_name_is_404_listing_the_served_names(call: Any) -> None:
    r = call("GET", "/splits", headers={"X-Deployment": "gsm8kk"})
    assert r.status_code == 404
    assert r.json() == {
        "detail": "unknown environment 'gsm8kk'; this server serves: digits, gsm8k, gsm8k-tools. "
        "Did you mean 'gsm8k'?"
    }
    r = call("POST", "/create", headers={"X-Deployment": "owner/nope", "X-Session-ID": "s1"}, json={
        "split": "train", "index": 0})  # fmt: skip
    assert r.status_code == 404
    assert (
        r.json()["detail"]
        == "unknown environment 'owner/nope'; this server serves: digits, gsm8k, gsm8k-tools"
    )
    # Nothing was created under that sid.
    assert call("POST", "/ping", headers={"X-Session-ID": "s1"}).status_code == 404


def test_no_name_keeps_the_reference_redirect(call: Any) -> None:
    for headers in ({}, {"X-Deployment": ""}):
        r = call("GET", "/tools?x=1", headers=headers)
        assert (r.status_code, r.headers["location"]) == (308, "/digits/tools?x=1")
    # An explicit path wins over the header.
    r = call("GET", "/gsm8k/splits", headers={"X-Deployment": "digits"})
    assert [s["name"] for s in r.json()] == ["train", "test"] and r.status_code == 200


def test_bare_create_and_session_routes_use_the_named_environment(call: Any) -> None:
    sid = uuid.uuid4().hex
    h = {"X-Session-ID": sid, "X-Deployment": "gsm8k-tools"}
    assert call("POST", "/create", headers=h, json={"split": "test", "index": 3}).status_code == 200
    prompt = call("GET", "/prompt", headers=h).json()[0]["text"]
    assert "calculator" in prompt  # the gsm8k-tools prompt, not a digits image
    names = {t["name"] for t in call("GET", "/task_tools", headers=h).json()["tools"]}
    assert names == {"calculator", "hint", "submit"}
    # The body's env_name wins over the header.
    sid2 = uuid.uuid4().hex
    r = call("POST", "/create", headers={**h, "X-Session-ID": sid2}, json={
        "env_name": "digits", "split": "test", "index": 0})  # fmt: skip
    assert r.status_code == 200
    blocks = call("GET", "/digits/prompt", headers={"X-Session-ID": sid2}).json()
    assert any(b["type"] == "image" for b in blocks)
    # No header, no env_name: the default environment, as the reference servers do.
    sid3 = uuid.uuid4().hex
    assert call(
        "POST", "/create", headers={"X-Session-ID": sid3}, json={"split": "test", "index": 0}
    ).is_success
    blocks = call("GET", "/prompt", headers={"X-Session-ID": sid3}, follow_redirects=True).json()
    assert any(b["type"] == "image" for b in blocks)


def test_openreward_client_without_variant_reaches_the_named_environment(three: list[Environment]) -> None:
    """The bug as a user met it: `get(name="gsm8k")` without a variant built digits tasks."""
    from openreward import EnvironmentsAPI

    gsm8k = three[1]
    with serve_app(create_app(three, ServerSettings())) as url:
        api = EnvironmentsAPI(base_url=url, api_key="k")  # `owner/name` needs a key client-side
        for name in ("gsm8k", "openai/gsm8k"):
            env = api.get(name=name)
            assert env.list_splits() == ["train", "test"]
            task = env.get_task("test", 0)
            assert task.environment_name == "gsm8k"
            assert task.task_spec == gsm8k.public(gsm8k.split("test").task(0))
            with env.session(split="test", index=0) as s:
                assert gsm8k.split("test").task(0)["question"] in s.get_prompt()[0].text
            with env.session(task=task) as s:
                gold = gsm8k.split("test").task(0)["answer"].split("####")[-1].strip()
                out = s.call_tool("submit", {"answer": gold})
                assert (out.reward, out.finished) == (1.0, True)
        tools_env = api.get(name="gsm8k-tools")
        with tools_env.session(split="train", index=0) as s:
            out = s.call_tool("calculator", {"expression": "6*7"})
            assert "42" in out.blocks[0].text
        from openreward.api._session.http import SessionResponseError

        with pytest.raises(SessionResponseError) as info:
            api.get(name="gsm8kk").list_splits()
        assert info.value.status == 404
        assert "Did you mean 'gsm8k'?" in info.value.message
        close = getattr(api, "close", None)
        if close is not None:
            close()
