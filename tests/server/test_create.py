"""``/create`` refuses what it could not serve, with a 4xx and a JSON detail."""

from __future__ import annotations

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import create_app


@pytest.mark.asyncio
async def test_task_spec_missing_fields_is_a_400_at_create(gsm8k: Environment) -> None:
    transport = httpx.ASGITransport(app=create_app([gsm8k]))
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
