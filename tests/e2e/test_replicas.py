"""Replicas: two ``envbuilder serve`` processes sharing one real Redis behind a round-robin
balancer, so every request of an episode may land on the other replica; both reference clients
complete their episodes without an error."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import redis

from envbuilder.environment import Environment
from tests.balancer import RoundRobin
from tests.conftest import ENVS
from tests.processes import serve_process
from tests.servers import serve_app

EPISODES = 100  # per client: 200 in all


@pytest.fixture
def balanced(redis_url: str) -> Iterator[tuple[str, RoundRobin]]:
    spec = str(ENVS / "gsm8k.yaml")
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(serve_process(spec, "--store", redis_url))[0] for _ in range(2)]
        balancer = RoundRobin(urls)
        yield stack.enter_context(serve_app(balancer)), balancer


def _gold(gsm8k: Environment, index: int) -> str:
    return gsm8k.split("test").task(index)["answer"].split("####")[-1].strip()


def test_both_reference_clients_across_two_replicas(
    balanced: tuple[str, RoundRobin], gsm8k: Environment, redis_url: str
) -> None:
    from openreward import EnvironmentsAPI
    from ors.client import ORS

    url, balancer = balanced
    rewards = []
    with ORS(base_url=url) as client:
        env = client.environment("gsm8k")
        for i in range(EPISODES):
            with env.session(split="test", index=i) as s:
                assert s.get_prompt()[0].text
                answer = _gold(gsm8k, i) if i % 2 == 0 else "-1"
                out = s.call_tool("submit", {"answer": answer})
                rewards.append(out.reward)
    api = EnvironmentsAPI(base_url=url, api_key=None)
    try:
        env = api.get(name="gsm8k", variant="gsm8k")
        for i in range(EPISODES):
            with env.session(split="test", index=i) as s:
                assert s.get_messages()[0].role == "user"
                answer = _gold(gsm8k, i) if i % 2 == 0 else "-1"
                out = s.call_tool("submit", {"answer": answer})
                assert out.finished
                rewards.append(out.reward)
    finally:
        close = getattr(api, "close", None)
        if close is not None:
            close()
    assert rewards == [1.0, 0.0] * EPISODES
    assert min(balancer.sent) > 4 * EPISODES  # both replicas answered about half the requests
    grades = redis.Redis.from_url(redis_url).hgetall("eb:grades")
    assert grades == {b"correct": b"%d" % EPISODES, b"incorrect": b"%d" % EPISODES}


def test_two_workers_serve_the_shipped_catalog(redis_url: str) -> None:
    import httpx

    with (
        serve_process(str(ENVS), "--store", redis_url, "--workers", "2") as (url, _),
        httpx.Client(base_url=url, timeout=300) as c,  # (httpx's default of 5 s: too short under load)
    ):
        names = c.get("/list_environments").json()
        assert {"gsm8k", "gsm8k-cot", "mmlu_stem", "digits", "hh_rlhf"} <= set(names)
        for name in names:
            split = c.get(f"/{name}/splits").json()[0]["name"]
            for k in range(4):  # several sessions, so that both workers answer some
                h = {"X-Session-ID": f"{name}-{k}"}
                assert c.post(
                    "/create", headers=h, json={"env_name": name, "split": split, "index": k}
                ).json() == {"sid": f"{name}-{k}"}
                assert c.get(f"/{name}/prompt", headers=h).status_code == 200
                if name == "gsm8k":
                    r = c.post(f"/{name}/call", headers=h, json={"name": "submit", "input": {"answer": "72"}})
                    assert r.text.startswith("event: task_id") and "event: end" in r.text
                assert c.post("/delete", headers=h).status_code == 200
        # The connection-level limits hold in every worker too: a 20 KB header gets 431.
        assert c.get("/health", headers={"x-filler": "x" * 20_000}).status_code == 431
