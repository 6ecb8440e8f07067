"""The trainers' own ORS adapters, unchanged, against envbuilder: TRL's ``OpenRewardSpec`` (its
three properties used as ``GRPOTrainer`` uses them) and SkyRL's openreward environment (on the
real ``skyrl_gym``), on the whole ``envs/`` folder served with an API key and on one-spec
servers, with correct, wrong and tool-using scripted episodes. Each adapter must reach the
environment it names and read the episode's reward its own way (TRL: last non-null; SkyRL:
the sum of the step rewards)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from envbuilder.authoring import gold_cases
from envbuilder.catalog import load_environments
from envbuilder.environment import Environment
from envbuilder.integrations import trl
from envbuilder.server import ServerSettings, create_app
from tests.conftest import ENVS
from tests.integrations.adapters import SkyRLOpenRewardEnv, hermes, skyrl_prepare_rows, trl_openreward
from tests.servers import serve_app

KEY = "sk-adapter-test-key"
NAMES = {"gsm8k": "gsm8k", "gsm8k_tools": "gsm8k-tools", "math500": "math500", "humaneval": "humaneval"}


@dataclass(frozen=True)
class Case:
    env: str
    label: str
    calls: tuple[tuple[str, str | None], ...]
    """(tool, what to send): ``gold`` / a literal answer for submit, or a tool's argument."""
    reward: float


CASES = [
    Case("gsm8k", "correct", (("submit", "gold"),), 1.0),
    Case("gsm8k", "wrong", (("submit", "-123456"),), 0.0),
    Case("gsm8k_tools", "calculator then correct", (("calculator", "6*7"), ("submit", "gold")), 1.0),
    Case("gsm8k_tools", "hint, wrong, wrong", (("hint", None), ("submit", "-1"), ("submit", "-2")), -0.25),
    Case("gsm8k_tools", "hint, wrong, correct", (("hint", None), ("submit", "-1"), ("submit", "gold")), 0.75),
    Case("gsm8k_tools", "wrong, correct", (("submit", "-1"), ("submit", "gold")), 1.0),
    Case("math500", "correct", (("submit", "gold"),), 1.0),
    Case("math500", "wrong", (("submit", "The answer is $\\boxed{-987654}$."),), 0.0),
    Case("humaneval", "correct", (("submit", "gold"),), 1.0),
    Case("humaneval", "wrong", (("submit", "    pass\n"),), 0.0),
]


@pytest.fixture(scope="module")
def envs() -> list[Environment]:
    loaded = load_environments([ENVS])
    assert not loaded.failures, loaded.failures
    return loaded.envs


@pytest.fixture(scope="module")
def served(envs: list[Environment]) -> Iterator[dict[str, str]]:
    """``serve envs/`` with an API key, and a one-spec server (no key) per environment used."""
    by_name = {e.name: e for e in envs}
    with serve_app(create_app(envs, ServerSettings(api_keys=(KEY,)))) as everything:
        urls = {"envs": everything}
        singles = [serve_app(create_app([by_name[n]], ServerSettings())) for n in NAMES.values()]
        try:
            for name, server in zip(NAMES.values(), singles, strict=True):
                urls[name] = server.__enter__()
            yield urls
        finally:
            for server in singles:
                server.__exit__(None, None, None)


def _gold_task(env: Environment) -> tuple[str, int, str]:
    """A task with its gold answer (the spec's `gold:`, else the grader's target)."""
    case = next(c for c in gold_cases(env, sample=1) if c.response is not None)
    assert case.response is not None
    return case.split, case.index, case.response


def _arguments(env: Environment, tool: str, value: str | None, gold: str) -> dict[str, Any]:
    if tool == "submit":
        return {"answer": gold if value == "gold" else value}
    if tool == "calculator":
        return {"expression": value}
    return {}


@dataclass(frozen=True)
class Setup:
    name: str
    env: Environment
    split: str
    index: int
    gold: str
    url: str
    key: str | None


def _setup(case: Case, server: str, envs: list[Environment], served: dict[str, str], mp: Any) -> Setup:
    """The environment a case runs on, a task with its gold answer, and where it is served (the
    session URL set as the openreward client reads it)."""
    name = NAMES[case.env]
    env = next(e for e in envs if e.name == name)
    split, index, gold = _gold_task(env)
    url, key = (served["envs"], KEY) if server == "envs" else (served[name], None)
    mp.setenv("OPENREWARD_SESSION_URL", url)
    return Setup(name, env, split, index, gold, url, key)


@pytest.mark.parametrize("server", ["envs", "single"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.env}-{c.label.replace(' ', '_')}")
def test_trl_openreward_spec(
    case: Case, server: str, envs: list[Environment], served: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _setup(case, server, envs, served, monkeypatch)
    name, env, split, index, gold, url, key = s.name, s.env, s.split, s.index, s.gold, s.url, s.key
    OpenRewardSpec = trl_openreward().OpenRewardSpec
    # On a one-spec server TRL's own default (no env_name) must work too.
    spec = OpenRewardSpec(
        url, env_name=name if server == "envs" else None, split=split, indices=[index], api_key=key
    )

    dataset = spec.train_dataset
    row = dataset[0]
    assert row["task_index"] == index
    assert row["id"] == env.split(split).task(index)["id"]  # metadata columns: this env's tasks
    factory = spec.environment_factory
    rollout = factory()
    for tool in {t.name for t in env.task_tools(env.split(split).task(index)).tools}:
        assert callable(getattr(rollout, tool)), tool  # every tool bound as a method
    prompt = rollout.reset(**row)
    assert prompt == "\n".join(b.text for b in env.prompt(env.split(split).task(index)) if b.text)
    for tool, value in case.calls:
        getattr(rollout, tool)(**_arguments(env, tool, value, gold))
    assert rollout.finished
    assert spec.reward_funcs(environments=[rollout]) == [pytest.approx(case.reward)]
    non_null = [r for r in rollout.rewards if r is not None]
    assert sum(non_null) == pytest.approx(case.reward)  # summing reads the same number
    rollout._close()


@pytest.mark.parametrize("server", ["envs", "single"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.env}-{c.label.replace(' ', '_')}")
def test_skyrl_openreward_env(
    case: Case, server: str, envs: list[Environment], served: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _setup(case, server, envs, served, monkeypatch)
    name, env, split, index, gold, key = s.name, s.env, s.split, s.index, s.gold, s.key
    if key:
        monkeypatch.setenv("OPENREWARD_API_KEY", key)
    deployment = f"GeneralReasoning/{name}" if server == "envs" else name  # owner/name, as on the platform

    rows = asyncio.run(skyrl_prepare_rows(deployment, split, 1))
    task = env.split(split).task(0)
    assert rows[0]["prompt"] == "".join(b.text for b in env.prompt(task) if b.text)
    assert rows[0]["tools"] == sorted(t.name for t in env.task_tools(task).tools)

    skyrl = SkyRLOpenRewardEnv(extras={"env_name": deployment, "split": split, "task_index": index})
    skyrl.init([{"role": "user", "content": "(prepared prompt)"}])
    assert skyrl.session.get_prompt()[0].text.startswith(
        env.prompt(env.split(split).task(index))[0].text[:40]
    )
    outputs = [skyrl.step(hermes(tool, _arguments(env, tool, value, gold))) for tool, value in case.calls]
    skyrl.close()
    assert outputs[-1]["done"] and outputs[-1]["metadata"]["finished"]
    assert not any(o["done"] for o in outputs[:-1])
    assert outputs[-1]["reward"] == pytest.approx(case.reward)  # the sum of the step rewards
    assert sum(skyrl.step_rewards) == pytest.approx(case.reward)


def test_wrong_name_on_a_multi_environment_server_is_an_error_not_another_env(
    served: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENREWARD_SESSION_URL", served["envs"])
    OpenRewardSpec = trl_openreward().OpenRewardSpec
    spec = OpenRewardSpec(served["envs"], env_name="gsm8kk", split="test", num_tasks=1, api_key=KEY)
    with pytest.raises(Exception, match="Did you mean 'gsm8k'"):
        _ = spec.train_dataset


@pytest.mark.parametrize("server", ["envs", "single"])
def test_trl_over_http_without_the_session_url_variable(
    server: str, envs: list[Environment], served: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``served_spec(url)``: TRL's adapter reaches the server with no OPENREWARD_SESSION_URL (the
    client alone would look for sessions at ``sessions.127.0.0.1``)."""
    monkeypatch.delenv("OPENREWARD_SESSION_URL", raising=False)
    trl_openreward()  # TRL's adapter without torch, as `served_spec` imports it
    env = next(e for e in envs if e.name == "gsm8k")
    split, index, gold = _gold_task(env)
    url, key = (served["envs"], KEY) if server == "envs" else (served["gsm8k"], None)
    options = {"env_name": "gsm8k"} if server == "envs" else {}
    spec = trl.served_spec(url, split=split, indices=[index], api_key=key, **options)
    row = spec.train_dataset[0]
    rollout = spec.environment_factory()
    assert rollout.reset(**row).startswith(env.split(split).task(index)["question"][:40])
    rollout.submit(answer=gold)
    assert spec.reward_funcs(environments=[rollout]) == [1.0]
    rollout._close()
