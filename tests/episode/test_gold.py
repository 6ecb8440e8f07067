"""No gold answer in what the agent reads while its episode runs: the target, a judge's reasoning
(which quotes the reference) and the other GOLD_DETAILS stay out of every answer's output (a
dialogue's turns, a simulated user's conversation, feedback) until the episode has finished, and
then only with ``submit.reveal_answer``. Played through a real server, judged by a scripted
judge on a real socket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml

from envbuilder.environment import Environment
from envbuilder.server import create_app
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, completion
from tests.servers import serve_app
from tests.tools.conftest import HERE

GOLD = "Paris"  # qa.jsonl's first answer: the judge's reference
REASONING = "The reference says Paris; the reply says Lyon.\nVERDICT: INCORRECT"
USER_SAYS = "Thanks, bye. ###STOP###"

SPEC = """
name: gold
dataset: {type: jsonl, files: {test: data/qa.jsonl}}
splits: {test: {}}
prompt: {template: "{{ question }}"}
submit: {reveal_answer: %s%s}
%s
"""

JUDGE = """
type: llm_judge
base_url: %s
model: judge-1
question: "{{ question }}"
reference: "{{ answer }}"
backoff: 0
cache: false
"""


def _grader(kind: str, base_url: str) -> str:
    judge = json.dumps(yaml.safe_load(JUDGE % base_url))
    if kind == "judge":
        return f"grader: {judge}"
    # a composite: the judge's summary (reasoning, target) nested among its children's
    return f"grader: {{type: all, graders: [{judge}, {{type: exact_match, target: '{{{{ answer }}}}'}}]}}"


def _judge_and_user(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    system = body["messages"][0]["content"]
    if system.startswith("You are Bob"):  # the simulated user
        return 200, completion(USER_SAYS), {}
    if "SCORE: <1-10>" in body["messages"][-1]["content"]:  # mt_bench's rubric
        return 200, completion("Wrong, unlike the reference.\nSCORE: 1"), {}
    return 200, completion(REASONING), {}


@pytest.fixture(scope="module")
def model() -> Iterator[ChatServer]:
    with ChatServer(_judge_and_user) as server:
        yield server


def _play(env: Environment, answers: list[str]) -> list[Any]:
    """The output of each of ``answers`` sent through the answer tool of a served ``env``, and
    the conversation ``/messages`` shows after it."""
    name, field = env.toolbox.submit.spec.name, env.toolbox.submit.spec.answer_field
    outs: list[Any] = []
    with serve_app(create_app([env])) as url, httpx.Client(base_url=url, timeout=30) as client:
        sid = {"X-Session-ID": "s1"}
        body = {"split": "test", "index": 0}
        assert client.post("/create", headers=sid, json=body).status_code == 200
        for answer in answers:
            r = client.post(f"/{env.name}/call", headers=sid, json={"name": name, "input": {field: answer}})
            assert r.status_code == 200, r.text
            output = _end(r.text)["output"]
            messages = client.get(f"/{env.name}/messages", headers=sid)
            assert messages.status_code == 200, messages.text
            outs.append((output, messages.text))
    return outs


def _end(stream: str) -> dict[str, Any]:
    for block in stream.replace("\r\n", "\n").split("\n\n"):
        if "event: end" in block:
            return json.loads("".join(x[6:] for x in block.split("\n") if x.startswith("data: ")))
    raise AssertionError(stream)


def _shows_gold(output: dict[str, Any]) -> bool:
    text = json.dumps(output)
    return GOLD in text or "reasoning" in text or "VERDICT" in text or '"target"' in text


def _env(reveal: bool, rest: str, submit: str = "") -> Environment:
    text = SPEC % (str(reveal).lower(), submit, rest)
    return Environment(parse_spec(text, file="gold.yaml", base_dir=HERE))


@pytest.mark.parametrize("reveal", [False, True])
@pytest.mark.parametrize("kind", ["judge", "composite"])
@pytest.mark.parametrize("grade", ["each", "end"])
def test_a_dialogue_shows_no_gold_before_its_end_and_then_only_when_revealed(
    model: ChatServer, reveal: bool, kind: str, grade: str
) -> None:
    dialogue = f"dialogue: {{turns: ['Sure?', 'Last word?'], grade: {grade}, reward: last}}"
    env = _env(reveal, _grader(kind, model.base_url) + "\n" + dialogue)
    outs = _play(env, ["Lyon", "Lyon, I think", "Lyon"])
    *running, (last, _) = outs
    for output, messages in running:
        assert not output["finished"]
        assert not _shows_gold(output), output
        assert not _shows_gold(json.loads(messages)), messages
    if grade == "each":  # each turn was graded: its outcome is shown, its gold is not
        assert running[0][0]["metadata"]["outcome"] == "incorrect"
    assert last["finished"] and last["metadata"]["outcome"] == "incorrect"
    assert _shows_gold(last) is reveal, last
    if reveal:
        judged = last["metadata"] if kind == "judge" else last["metadata"]["graders"][0]
        assert judged["target"] == GOLD and judged["judge"]["reasoning"] == REASONING


def test_mt_bench_as_shipped_never_shows_the_reference_or_the_judges_reasoning(model: ChatServer) -> None:
    text = (ENVS / "mt_bench.yaml").read_text().replace("https://api.openai.com/v1", model.base_url)
    env = Environment(parse_spec(text, file="mt_bench.yaml", base_dir=ENVS))
    split = env.split("test")
    index = next(i for i in range(len(split)) if split.task(i).get("reference") is not None)
    reference = split.task(index)["reference"]
    outs: list[Any] = []
    with serve_app(create_app([env])) as url, httpx.Client(base_url=url, timeout=30) as client:
        sid = {"X-Session-ID": "mt"}
        body = {"split": "test", "index": index, "secrets": {"OPENAI_API_KEY": "sk-test"}}
        assert client.post("/create", headers=sid, json=body).status_code == 200
        for answer in ["first reply", "second reply"]:
            call = {"name": "submit", "input": {"answer": answer}}
            r = client.post("/mt_bench/call", headers=sid, json=call)
            outs.append(_end(r.text)["output"])
    assert [o["finished"] for o in outs] == [False, True]
    for output in outs:  # mt_bench does not set reveal_answer: not even at the end
        assert output["metadata"]["outcome"] == "incorrect"
        assert "target" not in output["metadata"] and "reasoning" not in json.dumps(output)
        assert all(str(r)[:40] not in json.dumps(output) for r in reference), output


@pytest.mark.parametrize("reveal", [False, True])
def test_feedback_between_attempts_sees_no_gold_details(model: ChatServer, reveal: bool) -> None:
    feedback = (
        "Judge: {{ grade.judge.reasoning | default('hidden') }}; "
        "target {{ grade.target | default('hidden') }}"
    )
    submit = f", max_attempts: 2, feedback: {json.dumps(feedback)}"
    (first, _), (last, _) = _play(_env(reveal, _grader("judge", model.base_url), submit), ["Lyon", "Lyon"])
    assert first["blocks"][0]["text"] == "Judge: hidden; target hidden"
    assert not _shows_gold(first)
    shown = f"Judge: {REASONING}; target {GOLD}" if reveal else "Judge: hidden; target hidden"
    assert last["blocks"][0]["text"].startswith(shown)


@pytest.mark.parametrize("reveal", [False, True])
def test_a_simulated_users_conversation_ends_with_gold_only_when_revealed(
    model: ChatServer, reveal: bool
) -> None:
    user = f"user: {{base_url: '{model.base_url}', model: m, template: 'You are Bob.', cache: false}}"
    submit = ", name: send_message, answer_field: message"
    env = _env(reveal, _grader("judge", model.base_url) + "\n" + user, submit)
    [(last, messages)] = _play(env, ["Lyon"])
    assert last["finished"] and last["metadata"]["user_stopped"] is True
    assert _shows_gold(last) is reveal, last
    assert _shows_gold(json.loads(messages)) is reveal, messages  # the text says it when revealed
