"""What the door tests share: every shipped spec loaded with its model endpoints (an LLM judge,
τ²'s simulated customer) pointed at one local chat server, and an episode's scripted plays
(the gold answer, with the gold tool calls where the spec has them, and wrong answers), each
also played in process for the rewards the door must give."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envbuilder.authoring import gold_cases
from envbuilder.environment import Environment
from envbuilder.episode import Episode
from envbuilder.protocol import RunToolSuccess
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.fakes import phone_customer
from tests.fakes.chat_server import reply

SPECS = sorted(ENVS.glob("*.yaml"))
FIVE = ("gsm8k", "gsm8k_tools", "math500", "humaneval", "tau2_retail")
"""The specs every door must play with the right rewards (issue 36)."""

SECRETS = {"OPENAI_API_KEY": "sk-test-not-a-real-key"}
GREETING = "Hello! How can I help you today?"
CLOSING = " Is there anything else I can help you with?"


def model(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The chat server's answers: τ²'s customer (ends the chat when asked whether anything
    else is needed), else a judge whose rating depends on the reply."""
    messages = body["messages"]
    if "customer of a mobile network" in str(messages[0].get("content", "")):
        return phone_customer.customer(body, index)  # dual control: acts on the agent's guidance
    if "customer of an online shop" in str(messages[0].get("content", "")):
        said = messages[-1]["content"]
        if "anything else" in said:
            return 200, reply("No, that's all, thanks! ###STOP###"), {}
        return 200, reply("Hi, I'd like some help with my order, please."), {}
    text = messages[-1]["content"]
    return 200, reply(f"Fine.\nSCORE: {len(text) % 11}"), {}


def load(path: Path, base_url: str) -> Environment:
    """A shipped spec with its model endpoints at ``base_url`` (a single retry, no backoff)."""
    text = path.read_text().replace("https://api.openai.com/v1", base_url)
    text = text.replace("max_turns: 30", "max_turns: 30\n  max_retries: 1\n  backoff: 0")
    return Environment(parse_spec(text, file=path.name, base_dir=ENVS))


@dataclass
class Play:
    """A task and the tool calls an agent makes on it, in order."""

    label: str
    split: str
    index: int
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def plays(env: Environment) -> tuple[Play, Play]:
    """A gold play (the gold calls and answer) and a wrong one (wrong answers until the
    episode ends) on one task of ``env``."""
    assert env.submit is not None
    submit, field_ = env.submit.spec.name, env.submit.spec.answer_field
    cases = [c for c in gold_cases(env, sample=1) if c.response is not None]
    if cases:
        case = cases[0]
        split, index, answer = case.split, case.index, case.response
    else:  # no gold answer (a judged spec without one): any reply
        split, index, answer = next(iter(env.splits)), 0, "A careful, helpful and honest reply."
    assert answer is not None
    dialogue = env.spec.user is not None
    gold = Play("gold", split, index)
    if dialogue:
        gold.calls.append((submit, {field_: GREETING}))
    user_tools = set(env.toolbox.user_declared)
    for call in (cases[0].calls or []) if cases else []:
        if call["name"] in user_tools:  # the user's own (dual control): the agent tells it what to do
            gold.calls.append((submit, {field_: phone_customer.guidance(call["name"], call["arguments"])}))
        else:
            gold.calls.append((call["name"], dict(call["arguments"])))
    gold.calls.append((submit, {field_: answer + (CLOSING if dialogue else "")}))
    if env.spec.dialogue is not None:  # scripted user turns: answer each (the episode ends after the last)
        gold.calls += [(submit, {field_: answer})] * 8
    wrong = Play("wrong", split, index)
    if dialogue:  # no actions taken: the shop's database is not what the task needs
        wrong.calls += [(submit, {field_: GREETING}), (submit, {field_: "Sorry, I cannot help." + CLOSING})]
    else:
        wrong.calls += [(submit, {field_: w}) for w in ("-17", "-18.5", "0.25", "-3", "99991", "-1")]
    return gold, wrong


def reference(
    env: Environment, play: Play, loop: asyncio.AbstractEventLoop
) -> list[tuple[float | None, bool]]:
    """The (reward, finished) of each call of ``play`` in process, up to the end of the episode."""

    async def run() -> list[tuple[float | None, bool]]:
        episode = Episode(task=env.split(play.split).task(play.index), secrets=dict(SECRETS))
        out: list[tuple[float | None, bool]] = []
        try:
            for name, arguments in play.calls:
                result = await env.call_tool(episode, name, arguments)
                if isinstance(result, RunToolSuccess):
                    out.append((result.output.reward, result.output.finished))
                    if result.output.finished:
                        break
                else:
                    out.append((None, result.reason == "episode_finished"))
        finally:
            await env.end_session(episode)
        return out

    return loop.run_until_complete(run())


def full_reward(env: Environment) -> float:
    assert env.submit is not None
    return env.submit.spec.reward_correct
