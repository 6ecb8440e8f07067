"""The NeMo Gym door, end to end: NeMo Gym's rollout collection and simple agent (a client
written from NeMo Gym's source, tests/nemo_gym_client.py) against a real uvicorn, with a
scripted Responses API model on a local server, on every shipped spec: the task JSONL the
door serves, the episode's tools called through the door, the reward ``/verify`` returns."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from envbuilder.errors import EnvbuilderError
from envbuilder.server import ServerSettings, check_doors, create_app, uvicorn_options
from tests.conftest import ENVS
from tests.doors import FIVE, SPECS, Play, full_reward, load, model, plays, reference
from tests.fakes.chat_server import ChatServer
from tests.fakes.model_apis import responses_reply
from tests.nemo_gym_client import SimpleAgent, collect, read_jsonl
from tests.servers import serve_app

KEY = "n" * 32


class Policy:
    """The scripted model: the function calls of the current play, one per turn, then a message."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.final = ""

    def script(self, calls: list[tuple[str, dict[str, Any]]], final: str) -> None:
        self.calls, self.final = calls, final

    def __call__(self, body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        done = sum(1 for item in body["input"] if item.get("type") == "function_call_output")
        if done < len(self.calls):
            return 200, responses_reply(tool=self.calls[done]), {}
        return 200, responses_reply(text=self.final), {}


@pytest.fixture(scope="module")
def models() -> Iterator[ChatServer]:
    with ChatServer(model) as server:
        yield server


@pytest.fixture(scope="module")
def policy() -> Iterator[tuple[Policy, ChatServer]]:
    script = Policy()
    with ChatServer(script, route="/responses") as server:
        yield script, server


def _serve(envs: list[Any], **settings: Any) -> Any:
    options = ServerSettings(doors=("nemo-gym",), **settings)
    return serve_app(create_app(envs, options), **uvicorn_options(options))


def _rows(url: str, play: Play, headers: Any = None) -> list[dict[str, Any]]:
    params = {"split": play.split, "start": play.index, "stop": play.index + 1, "agent": "simple_agent"}
    response = httpx.get(f"{url}/nemo_gym/tasks.jsonl", params=params, headers=headers)
    assert response.status_code == 200, response.text
    return read_jsonl(response.text)


def _in_message(play: Play, answer_tool: str) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    """The play with its last answer given as the final message (NeMo Gym's usual way)."""
    *calls, (name, arguments) = play.calls
    assert name == answer_tool
    return calls, next(iter(arguments.values()))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_rollout_collection_gets_the_rewards_of_every_shipped_spec(
    path: Path, models: ChatServer, policy: tuple[Policy, ChatServer]
) -> None:
    script, model_server = policy
    served, ref = load(path, models.base_url), load(path, models.base_url)
    assert ref.submit is not None
    gold, wrong = plays(ref)
    dialogue = ref.spec.user is not None or ref.spec.dialogue is not None
    loop = asyncio.new_event_loop()
    try:
        expected = reference(ref, gold, loop)[-1][0]
        loop.run_until_complete(ref.aclose())
    finally:
        loop.close()
    with _serve([served]) as url:
        rows = _rows(url, gold)
        assert len(rows) == 1
        row = rows[0]
        assert row["envbuilder"] == {
            "env_name": ref.name,
            "split": gold.split,
            "index": gold.index,
            "task_id": ref.split(gold.split).task(gold.index).get("id"),
        }
        assert row["agent_ref"] == {"type": "responses_api_agents", "name": "simple_agent"}
        names = [t["name"] for t in row["responses_create_params"]["tools"]]
        assert ref.submit.spec.name in names
        agent = SimpleAgent(url, model_server.base_url)
        try:
            if dialogue:  # every message goes through the answer tool, whose output is the user's reply
                script.script(gold.calls, "Goodbye.")
            else:
                script.script(*_in_message(gold, ref.submit.spec.name))
            got = collect(agent, rows)
            if expected is None:  # ungradeable in process: void through the door too
                assert got.results == [] and got.failures[0]["status"] == 503
                return
            assert got.failures == [] and len(got.results) == 1
            assert got.results[0]["reward"] == expected
            assert got.metrics is not None and got.metrics["agent_metrics"]["mean/reward"] == expected
            if path.stem in FIVE:
                assert expected == full_reward(ref)
                if dialogue:
                    script.script(wrong.calls, "Goodbye.")
                else:
                    script.script(gold.calls[:-1], wrong.calls[0][1][ref.submit.spec.answer_field])
                assert [r["reward"] for r in collect(agent, rows).results] == [0.0]
        finally:
            agent.close()


def test_the_answer_tool_called_by_the_model_is_graded(
    policy: tuple[Policy, ChatServer], models: ChatServer
) -> None:
    script, model_server = policy
    env = load(ENVS / "gsm8k_tools.yaml", models.base_url)
    gold, _ = plays(env)
    with _serve([env]) as url:
        agent = SimpleAgent(url, model_server.base_url)
        try:
            script.script([("calculator", {"expression": "6*7"}), *gold.calls], "Done.")
            got = collect(agent, _rows(url, gold))
            assert [r["reward"] for r in got.results] == [1.0]
            outputs = [o for o in got.results[0]["response"]["output"] if o["type"] == "function_call_output"]
            assert outputs[0]["output"] == "42"
        finally:
            agent.close()


def test_a_void_grade_is_a_failed_rollout_never_zero(policy: tuple[Policy, ChatServer]) -> None:
    """mt_bench's judge gives no verdict: the rollout fails (503), it is not rewarded 0."""
    script, model_server = policy

    def silent(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        from tests.fakes.chat_server import reply

        return 200, reply("I cannot tell."), {}

    with ChatServer(silent) as judge:
        env = load(ENVS / "mt_bench.yaml", judge.base_url)
        gold, _ = plays(env)
        with _serve([env]) as url:
            agent = SimpleAgent(url, model_server.base_url)
            try:
                script.script(gold.calls, "Done.")
                got = collect(agent, _rows(url, gold))
            finally:
                agent.close()
    assert got.results == []
    assert got.failures[0]["status"] == 503 and "void" in got.failures[0]["detail"]


@pytest.fixture(scope="module")
def gsm8k_url(models: ChatServer) -> Iterator[str]:
    with _serve([load(ENVS / "gsm8k.yaml", models.base_url)], api_keys=(KEY,)) as url:
        yield url


@pytest.mark.parametrize(
    ("path", "body", "cookie", "status", "detail"),
    [
        ("/verify", {"response": {"output": []}}, None, 422, "responses_create_params"),
        ("/verify", {"responses_create_params": {}, "response": {}}, None, 422, "response.output"),
        ("/verify", {"responses_create_params": {}, "response": {"output": []}}, None, 422, "envbuilder"),
        ("/seed_session", {"envbuilder": {"split": "train"}}, None, 422, "index"),
        ("/seed_session", {"envbuilder": {"split": "nope", "index": 0}}, None, 400, "Invalid split"),
        ("/seed_session", [1], None, 422, "object"),
        ("/submit", {"answer": "1"}, None, 400, "seed_session"),
        ("/submit", {"answer": "1"}, "nope", 404, "not found"),
        ("/aggregate_metrics", {}, None, 422, "verify_responses"),
    ],
)
def test_bad_requests_get_a_4xx_with_detail(
    gsm8k_url: str, path: str, body: Any, cookie: str | None, status: int, detail: str
) -> None:
    headers = {"X-API-Key": KEY}
    if cookie:
        headers["cookie"] = f"envbuilder_nemo_gym={cookie}"
    response = httpx.post(f"{gsm8k_url}{path}", json=body, headers=headers)
    assert response.status_code == status, response.text
    assert detail in str(response.json()["detail"])


def test_api_keys_are_honoured(gsm8k_url: str) -> None:
    assert httpx.post(f"{gsm8k_url}/seed_session", json={}).status_code == 401
    assert httpx.get(f"{gsm8k_url}/nemo_gym/tasks.jsonl").status_code == 401
    rows = httpx.get(f"{gsm8k_url}/nemo_gym/tasks.jsonl", params={"stop": 3}, headers={"X-API-Key": KEY})
    assert len(read_jsonl(rows.text)) == 3


def test_a_wrong_tool_call_is_shown_to_the_model(gsm8k_url: str) -> None:
    headers = {"X-API-Key": KEY}
    rows = read_jsonl(
        httpx.get(f"{gsm8k_url}/nemo_gym/tasks.jsonl", params={"stop": 1}, headers=headers).text
    )
    with httpx.Client(base_url=gsm8k_url, headers=headers) as http:
        assert http.post("/seed_session", json=rows[0]).status_code == 200
        answer = http.post("/submit", json={"colour": "red"})
        assert answer.status_code == 422 and "answer" in answer.json()["detail"]
        assert http.post("/submit", json={"answer": "-1"}).text.startswith("Incorrect")
        again = http.post("/submit", json={"answer": "-1"})
        assert again.status_code == 409


def test_the_door_refuses_what_nemo_gym_cannot_express(models: ChatServer) -> None:
    two = [load(ENVS / "gsm8k.yaml", models.base_url), load(ENVS / "math500.yaml", models.base_url)]
    with pytest.raises(EnvbuilderError) as refused:
        check_doors(["nemo-gym"], two)
    assert refused.value.code == "door_refuses" and "2 environments are served (gsm8k, math500)" in str(
        refused.value
    )
    text = (ENVS / "gsm8k_tools.yaml").read_text().replace("name: hint", "name: verify")
    from envbuilder.environment import Environment
    from envbuilder.spec import parse_spec

    clash = Environment(parse_spec(text, file="gsm8k_tools.yaml", base_dir=ENVS))
    with pytest.raises(EnvbuilderError) as refused:
        check_doors(["nemo-gym"], [clash])
    assert "its tool 'verify' would take the route /verify" in str(refused.value)
    with pytest.raises(EnvbuilderError) as unknown:
        check_doors(["nemo_gym"], [clash])
    assert unknown.value.code == "unknown_door" and "Did you mean 'nemo-gym'?" in str(unknown.value)


def test_a_rollout_moves_between_servers_on_one_redis(
    models: ChatServer, policy: tuple[Policy, ChatServer], redis_url: str
) -> None:
    """Seeded on one server, its tools called on another, verified on the first: the episode,
    and the result of the call that ended it, live in the shared store."""
    envs = [[load(ENVS / "gsm8k_tools.yaml", models.base_url)] for _ in range(2)]
    with _serve(envs[0], store=redis_url) as one, _serve(envs[1], store=redis_url) as two:
        gold, _ = plays(envs[0][0])
        row = _rows(one, gold)[0]
        seeded = httpx.post(f"{one}/seed_session", json=row)
        cookie = {"cookie": f"envbuilder_nemo_gym={seeded.cookies['envbuilder_nemo_gym']}"}
        assert httpx.post(f"{two}/calculator", json={"expression": "6*7"}, headers=cookie).text == "42"
        ended = httpx.post(f"{two}/submit", json=gold.calls[-1][1], headers=cookie)
        assert ended.status_code == 200 and ended.text.startswith("Correct")
        response = {"output": [{"type": "message", "role": "assistant", "content": []}]}
        verified = httpx.post(f"{one}/verify", json={**row, "response": response}, headers=cookie)
        assert verified.status_code == 200 and verified.json()["reward"] == 1.0
        again = httpx.post(f"{two}/verify", json={**row, "response": response}, headers=cookie)
        assert again.status_code == 404  # verify ends the episode


NEMO_GYM_PYTHON = os.environ.get("ENVBUILDER_NEMO_GYM_PYTHON")
"""A Python (3.12 or later) with the real ``nemo-gym`` installed; its tests skip without one."""


def _nemo_reply(reply: dict[str, Any]) -> dict[str, Any]:
    """A Responses API answer with every field NeMo Gym's ``NeMoGymResponse`` requires."""
    reply.update(created_at=0, model="scripted", parallel_tool_calls=False, tool_choice="auto", tools=[])
    reply["usage"].update(
        input_tokens_details={"cached_tokens": 0}, output_tokens_details={"reasoning_tokens": 0}
    )
    return reply


@pytest.mark.skipif(
    not NEMO_GYM_PYTHON,
    reason="NeMo Gym's own agent needs a Python 3.12 with nemo-gym (0.4.0 on 3.12): set "
    "ENVBUILDER_NEMO_GYM_PYTHON (.ci/run does where the machine has a Python 3.12)",
)
@pytest.mark.parametrize("name", FIVE)
def test_the_real_nemo_gym_simple_agent_gets_the_rewards(
    name: str, models: ChatServer, tmp_path: Path
) -> None:
    """NeMo Gym's own SimpleAgent (its server, ServerClient and aiohttp client, in a Python
    with nemo-gym) runs a gold rollout and a wrong one against the door, one server and one
    agent process for both: the full reward, then 0."""
    served = load(ENVS / f"{name}.yaml", models.base_url)
    assert served.submit is not None
    gold, wrong = plays(served)
    dialogue = served.spec.user is not None
    if dialogue:  # every message goes through the answer tool
        scripts = [(gold.calls, "Goodbye."), (wrong.calls, "Goodbye.")]
    else:
        calls, final = _in_message(gold, served.submit.spec.name)
        scripts = [(calls, final), (calls, wrong.calls[0][1][served.submit.spec.answer_field])]
    rollout = [-1]

    def scripted(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        done = sum(1 for item in body["input"] if item.get("type") == "function_call_output")
        if done == 0 and not any(item.get("role") == "assistant" for item in body["input"]):
            rollout[0] += 1  # a rollout's first request (the rows run one after the other)
        calls, final = scripts[rollout[0]]
        if done < len(calls):
            return 200, _nemo_reply(responses_reply(tool=calls[done])), {}
        return 200, _nemo_reply(responses_reply(text=final)), {}

    with ChatServer(scripted, route="/responses") as model_server, _serve([served]) as url:
        rows = tmp_path / "rows.jsonl"
        row = _rows(url, gold)
        rows.write_text("".join(json.dumps(r) + "\n" for r in row * 2))
        model_port = model_server.base_url.rsplit(":", 1)[1].split("/")[0]
        script = Path(__file__).resolve().parent.parent / "nemo_gym_real.py"
        assert NEMO_GYM_PYTHON is not None
        run = subprocess.run(
            [NEMO_GYM_PYTHON, str(script), url.rsplit(":", 1)[1], model_port, str(rows)],
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert run.returncode == 0, run.stderr[-2000:]
    answers = [json.loads(line) for line in run.stdout.splitlines()]
    assert [a["status"] for a in answers] == [200, 200], run.stderr[-2000:]
    assert [json.loads(a["body"])["reward"] for a in answers] == [full_reward(served), 0.0]
