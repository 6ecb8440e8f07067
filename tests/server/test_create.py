"""``/create`` refuses what it could not serve, with a 4xx and a JSON detail."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app


@pytest.mark.asyncio
async def test_task_spec_missing_fields_is_a_400_at_create(gsm8k: Environment) -> None:
    transport = httpx.ASGITransport(app=create_app([gsm8k], ServerSettings(client_tasks=True)))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        r = await client.post("/create", headers={"X-Session-ID": "a"}, json={"task_spec": {"id": "x"}})
        assert (r.status_code, r.json()) == (
            400,
            {
                "detail": "task_spec lacks the fields 'answer', 'question'. "
                "Send a task as /task or /tasks return it"
            },
        )
        assert (await client.post("/ping", headers={"X-Session-ID": "a"})).status_code == 404
        task = gsm8k.split("test").task(0)
        r = await client.post("/create", headers={"X-Session-ID": "a"}, json={"task_spec": task})
        assert r.json() == {"sid": "a"}


@pytest.mark.asyncio
async def test_a_task_naming_no_served_row_needs_client_tasks(gsm8k: Environment) -> None:
    transport = httpx.ASGITransport(app=create_app([gsm8k]))
    task = {**gsm8k.split("test").task(0), "id": "mine-1"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        r = await client.post("/create", headers={"X-Session-ID": "a"}, json={"task_spec": task})
        assert r.status_code == 403
        assert r.json()["detail"] == (
            "task_spec names no task this environment serves (send a task as /task or /tasks "
            "returns it, id included); tasks a client writes are graded only on a server "
            "started with --client-tasks"
        )


SID = {"X-Session-ID": "s"}
TASK = {"split": "test", "index": 0}

REFUSED_LATER = [
    pytest.param({}, {"split": "nope", "index": 0}, 400, "Invalid split", id="split"),
    pytest.param({}, {"split": "test", "index": 10**9}, 400, "Invalid index", id="index"),
    pytest.param(
        {},
        {**TASK, "env_name": "nosuch"},
        404,
        "unknown environment 'nosuch'; this server serves: gsm8k",
        id="env",
    ),
    pytest.param({}, {**TASK, "toolset_name": "cli"}, 400, None, id="toolset"),
    pytest.param({}, {"task_spec": {"id": "mine-1", "question": "q"}}, 403, None, id="task_spec"),
    pytest.param({"X-Secrets": "%%%"}, TASK, 400, None, id="secrets"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize("fast", [True, False], ids=["fast-door", "fastapi"])
@pytest.mark.parametrize(("headers", "body", "status", "detail"), REFUSED_LATER)
async def test_a_sid_in_use_is_refused_before_anything_else_is_checked(
    gsm8k: Environment,
    fast: bool,
    headers: dict[str, str],
    body: dict[str, object],
    status: int,
    detail: str | None,
) -> None:
    """docs/protocol.md §5.1, as the reference servers: missing sid, body, sid in use, then the
    environment, the task and the secrets."""
    app = create_app([gsm8k])
    app.front.fast = fast
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        fresh = await client.post("/create", headers={"X-Session-ID": "t", **headers}, json=body)
        assert fresh.status_code == status, fresh.text
        if detail is not None:
            assert fresh.json() == {"detail": detail}
        assert (await client.post("/create", headers=SID, json=TASK)).json() == {"sid": "s"}
        r = await client.post("/create", headers={**SID, **headers}, json=body)
        assert (r.status_code, r.json()) == (400, {"detail": "Session already exists"})
        assert (await client.post("/ping", headers={"X-Session-ID": "t"})).status_code == 404


@pytest.mark.asyncio
async def test_concurrent_creates_of_one_sid_give_one_session(gsm8k: Environment) -> None:
    """The sid is taken only by the store's atomic add: of many creates racing for one sid,
    valid or not, exactly one succeeds, and the invalid ones never hold it."""
    transport = httpx.ASGITransport(app=create_app([gsm8k]))
    invalid = [{"split": "nope", "index": 0}, {"task_spec": {"id": "mine-1"}}] * 4
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        replies = await asyncio.gather(*(client.post("/create", headers=SID, json=TASK) for _ in range(8)))
        assert sorted(r.status_code for r in replies) == [200] + [400] * 7
        assert all(r.json() == {"detail": "Session already exists"} for r in replies if r.status_code == 400)
        refused = await asyncio.gather(*(client.post("/create", headers=SID, json=b) for b in invalid))
        assert all(r.json() == {"detail": "Session already exists"} for r in refused)
        assert (await client.post("/delete", headers=SID)).status_code == 200
        refused = await asyncio.gather(*(client.post("/create", headers=SID, json=b) for b in invalid))
        assert sorted(r.status_code for r in refused) == [400] * 4 + [403] * 4
        assert (await client.post("/create", headers=SID, json=TASK)).json() == {"sid": "s"}
