"""``/create`` refuses what it could not serve, with a 4xx and a JSON detail."""

from __future__ import annotations

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
