"""End to end (issue 31): numbers in a client's text never become a 500 or a void grade. A task
id of 4,301 digits, a superscript digit, an integer past 64 bits in a ``task_spec`` or a tool
call's input: each gets a 4xx with a JSON detail, in the memory store and in Redis; an answer
made of thousands of digits names no option, it does not break the grader."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import pytest

from envbuilder.environment import Environment, load_environment
from envbuilder.server import ServerSettings, create_app, uvicorn_options
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.servers import serve_app

BIG = "9" * 30  # past 2**64
CHOICE = """\
name: choices
dataset: {type: parquet, files: {test: data/mmlu_stem/test-00000-of-00001.parquet}}
splits: {test: {}}
prompt: {template: "{{ question }}"}
grader: {type: choice, target: "{{ answer }}", choices_field: choices, accept_numbers: true}
"""


@pytest.fixture(params=["memory", "redis"])
def url(request: pytest.FixtureRequest, gsm8k: Environment) -> Iterator[str]:
    store = "memory" if request.param == "memory" else str(request.getfixturevalue("redis_url"))
    settings = ServerSettings(store=store)
    envs = [
        gsm8k,
        load_environment(ENVS / "gsm8k_tools.yaml"),
        Environment(parse_spec(CHOICE, base_dir=ENVS)),
    ]
    with serve_app(create_app(envs, settings), **uvicorn_options(settings)) as served:
        yield served


def _end(stream: str) -> dict:
    for block in stream.replace("\r\n", "\n").split("\n\n"):
        if block.startswith("event: end"):
            return json.loads("".join(x[6:] for x in block.split("\n") if x.startswith("data: ")))
    raise AssertionError(stream)


@pytest.mark.parametrize("task_id", ["test-" + "9" * 4301, "test-²", "test-" + "1" * 19, "test--5"])
def test_a_task_id_no_row_can_have_is_refused_as_unknown(url: str, task_id: str) -> None:
    with httpx.Client(base_url=url) as c:
        r = c.post("/create", headers={"X-Session-ID": uuid.uuid4().hex}, json={"task_spec": {"id": task_id}})
        assert r.status_code == 403, r.text
        assert r.json()["detail"].startswith("task_spec names no task this environment serves")
        # A served id still finds its row.
        r = c.post(
            "/create", headers={"X-Session-ID": uuid.uuid4().hex}, json={"task_spec": {"id": "test-3"}}
        )
        assert r.status_code == 200


def test_integers_past_64_bits_are_a_422(url: str) -> None:
    with httpx.Client(base_url=url) as c:
        h = {"X-Session-ID": uuid.uuid4().hex, "content-type": "application/json"}
        r = c.post(
            "/create", headers=h, content='{"task_spec": {"id": "test-3", "n": BIG}}'.replace("BIG", BIG)
        )
        assert r.status_code == 422
        [error] = r.json()["detail"]
        assert error["loc"] == ["body", "task_spec"]
        assert error["msg"].endswith(
            "holds an integer outside the 64-bit range; send large numbers as strings"
        )
        r = c.post("/create", headers=h, json={"env_name": "gsm8k-tools", "split": "test", "index": 0})
        assert r.status_code == 200
        for body in (
            '{"name": "submit", "input": {"answer": "1", "n": BIG}}',
            '{"name": "calculator", "input": {"expression": [BIG]}}',
            '{"name": "submit", "input": {"answer": {"deep": [1, -BIG]}}}',
        ):
            r = c.post("/gsm8k-tools/call", headers=h, content=body.replace("BIG", BIG))
            assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "input"], r.text
        # Nothing was counted: the episode's two attempts are whole.
        r = c.post("/gsm8k-tools/call", headers=h, json={"name": "submit", "input": {"answer": "-1"}})
        assert _end(r.text)["output"]["metadata"]["attempt"] == 1
        # The largest 64-bit integers are kept as they are.
        r = c.post(
            "/gsm8k-tools/call", headers=h, json={"name": "calculator", "input": {"expression": "2*3"}}
        )
        assert _end(r.text)["ok"] is True
        h2 = {"X-Session-ID": uuid.uuid4().hex}
        task = {"id": "test-4", "n": 2**63 - 1, "m": -(2**63)}
        assert c.post("/create", headers=h2, json={"task_spec": task}).status_code == 200


@pytest.mark.parametrize("answer", ["9" * 5000, "²", "(12345)"])
def test_a_choice_answer_of_odd_digits_names_no_option(url: str, answer: str) -> None:
    """A number no option has is read as naming no option (as "I don't know" is), never as a
    grader failure: int() of the answer's 5,000 digits or of '²' raised inside the grader."""
    with httpx.Client(base_url=url) as c:
        h = {"X-Session-ID": uuid.uuid4().hex}
        r = c.post("/create", headers=h, json={"env_name": "choices", "split": "test", "index": 0})
        assert r.status_code == 200
        r = c.post("/choices/call", headers=h, json={"name": "submit", "input": {"answer": answer}})
        metadata = _end(r.text)["output"]["metadata"]
        assert metadata["reason"] == "no option letter could be found in the answer", metadata
