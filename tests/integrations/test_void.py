"""Void, not zero: an episode that could not be graded for a reason outside the agent's answer
(a judge endpoint that answers 500 or is gone, a sandbox engine that cannot be reached) ends
with reward null and ``metadata.void``, and every trainer integration hands it on as its
trainer skips a sample, never as 0: TRL (in process and its own ORS adapter over HTTP),
SkyRL, verl, verifiers (a real rollout), and ``eval``'s summary. The same answers graded by
a working judge are paid, so each test also shows that the void comes from the failure."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import verifiers as vf
from openai import AsyncOpenAI

from envbuilder.environment import load_environment
from envbuilder.eval import summarize
from envbuilder.integrations import LocalEpisode, skyrl, trl, verl
from envbuilder.integrations import verifiers as vf_spec
from envbuilder.integrations._local import environment
from envbuilder.server import ServerSettings, create_app
from envbuilder.threadloop import run_sync as run
from tests.conftest import ENVS, judged_spec
from tests.fakes.chat_server import ChatServer, completion, reply
from tests.integrations.adapters import trl_openreward
from tests.servers import serve_app

GSM8K = ENVS / "data/gsm8k/test-00000-of-00001.parquet"
UNREACHABLE = "tcp://127.0.0.1:1"
"""A container engine address where nothing listens (the sandbox cannot start)."""


def _judge_down(body: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    return 500, {"error": {"message": "the judge is down"}}, {}


def _judge_up(body: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    return 200, completion("VERDICT: CORRECT"), {}


def _judged(tmp_path: Path, base_url: str, **extra: object) -> Path:
    spec = tmp_path / "judged.yaml"
    spec.write_text(
        judged_spec(base_url, data=GSM8K, api_key_secret=None, max_retries=0, cache=False, **extra)
    )
    return spec


@pytest.fixture
def judge_down() -> Iterator[ChatServer]:
    with ChatServer(_judge_down) as server:
        yield server


@pytest.fixture
def gone_url() -> str:
    """The address of a judge whose server has closed (connections are refused)."""
    with ChatServer(_judge_up) as server:
        url = server.base_url
    return url


def _submit(episode: LocalEpisode, answer: str) -> Any:
    env = episode.env
    assert env.submit is not None
    try:
        return episode.call(env.submit.spec.name, {env.submit.spec.answer_field: answer})
    finally:
        run(env.aclose())  # the judge's connections, on the loop that opened them


# -- the episode itself ---------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["no_reward", "incorrect"])
def test_a_judge_that_answers_500_makes_the_episode_void_whatever_the_policy(
    tmp_path: Path, judge_down: ChatServer, policy: str
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        _judged(tmp_path, judge_down.base_url).read_text() + f"submit: {{on_ungradeable: {policy}}}\n"
    )
    episode = LocalEpisode.of(load_environment(spec), "test", 0)
    out = _submit(episode, "42")
    assert out.finished and out.reward is None  # `incorrect` is for answers, not for the judge's failure
    assert out.metadata["outcome"] == "ungradeable"
    assert "500" in out.metadata["void"] and episode.void == out.metadata["void"]
    assert len(judge_down.requests) == 1


def test_an_unreadable_answer_is_not_void(tmp_path: Path) -> None:
    """Void is the environment's failure only: an answer the grader cannot read stays the
    answer's (ungradeable, its spec's policy decides), with no ``void``."""
    episode = LocalEpisode.of(load_environment(ENVS / "gsm8k.yaml"), "test", 0)
    out = _submit(episode, "I do not know.")
    assert out.metadata["outcome"] == "ungradeable" and "void" not in out.metadata
    assert episode.void is None


def test_a_sandbox_that_cannot_start_makes_the_episode_void(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", UNREACHABLE)
    (tmp_path / "tasks.jsonl").write_text(
        json.dumps({"id": "t0", "question": "Define f() returning 1."}) + "\n"
    )
    spec = tmp_path / "coded.yaml"
    spec.write_text(
        "name: coded\n"
        "dataset: {type: jsonl, files: {test: tasks.jsonl}}\n"
        "splits: {test: {}}\n"
        'prompt: {template: "{{ question }}"}\n'
        "submit: {on_ungradeable: incorrect}\n"
        "grader:\n"
        "  type: unit_tests\n"
        "  backend: docker\n"
        '  program: "{{ answer }}\\nassert f() == 1\\n"\n'
    )
    episode = LocalEpisode.of(load_environment(spec), "test", 0)
    out = _submit(episode, "```python\ndef f():\n    return 1\n```")
    assert out.finished and out.reward is None
    assert "the sandbox could not run the code" in out.metadata["void"]
    assert "cannot be reached" in out.metadata["void"]


# -- the trainers -------------------------------------------------------------------------------


def test_trl_in_process_reward_is_none_for_a_void_episode_and_paid_when_the_judge_works(
    tmp_path: Path, judge_down: ChatServer
) -> None:
    for url, expected in ((judge_down.base_url, None), (None, 1.0)):
        if url is None:
            with ChatServer(_judge_up) as up:
                rewards, void = _trl_rollout(_judged(tmp_path, up.base_url))
        else:
            rewards, void = _trl_rollout(_judged(tmp_path, url))
        assert rewards == [expected]
        assert (void is not None) == (expected is None)


def _trl_rollout(spec: Path) -> tuple[list[float | None], str | None]:
    setup = trl.TRLSpec(load_environment(spec), split="test", num_tasks=1)
    rollout = setup.environment_factory()
    rollout.reset(**setup.train_dataset[0])
    rollout.submit(answer="18")
    assert rollout.finished
    rewards = setup.reward_funcs(environments=[rollout])
    void = rollout.void
    rollout.episode.end()  # type: ignore[union-attr]
    run(setup.env.aclose())
    return rewards, void


def test_trl_skips_what_reward_none_means(tmp_path: Path, judge_down: ChatServer) -> None:
    """TRL's GRPOTrainer turns a None reward into NaN and leaves a row whose every reward
    function gave NaN out of the group's mean (its advantage is 0): the contract this relies
    on, read from the installed trl's source."""
    from importlib.metadata import distribution

    trl_openreward()  # trl installed (a skip where it is not, a failure under CI)
    source = Path(str(distribution("trl").locate_file("trl/trainer/grpo_trainer.py"))).read_text()
    assert "reward if reward is not None else torch.nan" in source
    assert "unscorable_mask = torch.isnan(rewards_per_func).all(dim=1)" in source


def test_trls_own_ors_adapter_over_http_reads_none(
    tmp_path: Path, judge_down: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = load_environment(_judged(tmp_path, judge_down.base_url))
    with serve_app(create_app([env], ServerSettings())) as url:
        monkeypatch.setenv("OPENREWARD_SESSION_URL", url)
        spec = trl_openreward().OpenRewardSpec(url, split="test", indices=[0])
        rollout = spec.environment_factory()
        rollout.reset(**spec.train_dataset[0])
        rollout.submit(answer="18")
        assert rollout.finished
        assert spec.reward_funcs(environments=[rollout]) == [None]  # skipped by GRPOTrainer
        assert rollout.rewards == [None]
        rollout._close()


def test_the_wire_carries_null_and_the_reason(
    tmp_path: Path, gone_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over HTTP with the openreward client (what SkyRL's adapter reads): reward null and
    ``metadata.void`` for a judge whose server is gone (connection refused)."""
    from openreward import EnvironmentsAPI

    env = load_environment(_judged(tmp_path, gone_url))
    with serve_app(create_app([env], ServerSettings())) as url:
        monkeypatch.setenv("OPENREWARD_SESSION_URL", url)
        served = EnvironmentsAPI(base_url=url, api_key=None).get(name="judged")
        with served.session(split="test", index=0) as session:
            out = session.call_tool(tool_name="submit", input={"answer": "18"})
    assert out.finished and out.reward is None
    assert out.metadata is not None and out.metadata["void"]


def test_skyrl_steps_carry_none_and_the_void_reason(tmp_path: Path, judge_down: ChatServer) -> None:
    spec = _judged(tmp_path, judge_down.base_url)
    env = skyrl.EnvbuilderTextEnv(extras={"spec": str(spec), "split": "test", "task_index": 0})
    env.init([])
    out = env.step("The answer is 18.")  # no tool call: the final answer, submitted
    env.close()
    run(env.episode.env.aclose())
    assert out["done"] and out["reward"] is None  # SkyRL's generator skips a None step reward
    assert "500" in out["metadata"]["void"]
    metrics = env.get_metrics()
    assert metrics["void"] is True and metrics["graded"] is False and "reward" not in metrics


def test_verl_compute_score_marks_the_void(tmp_path: Path, judge_down: ChatServer) -> None:
    spec = _judged(tmp_path, judge_down.base_url)
    info = {"spec": str(spec), "split": "test", "index": 0}
    scored = verl.compute_score("judged", "18", "", info)
    run(environment(spec).aclose())
    assert scored["void"] == 1 and scored["graded"] == 0
    (tmp_path / "up").mkdir()
    with ChatServer(_judge_up) as up:
        working = str(_judged(tmp_path / "up", up.base_url))
        paid = verl.compute_score("judged", "18", "", {**info, "spec": working})
        run(environment(working).aclose())
    assert paid == {"score": 1.0, "graded": 1, "void": 0}


def test_verifiers_rollout_of_a_void_episode_is_an_infra_error(
    tmp_path: Path, judge_down: ChatServer
) -> None:
    env = vf_spec.load_environment(_judged(tmp_path, judge_down.base_url), split="test", num_tasks=1)

    def model(request: dict[str, Any], _: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        return 200, reply("The answer is 18."), {}

    async def run(base_url: str) -> Any:
        async with AsyncOpenAI(base_url=base_url, api_key="sk-local") as openai:
            client = vf.OpenAIChatCompletionsClient(openai)
            try:
                return await env.evaluate(
                    client, "scripted", num_examples=1, on_progress=lambda *a, **k: None
                )
            finally:
                await env.env.aclose()

    with ChatServer(model) as server:
        results = asyncio.run(run(server.base_url))
    (output,) = results["outputs"]
    assert output["error"] is not None and "void" in json.dumps(output["error"])
    assert output["metrics"]["graded"] == 0.0


# -- eval ---------------------------------------------------------------------------------------


def _record(index: int, reward: float | None, metadata: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "split": "test",
        "index": index,
        "finished": True,
        "reward": reward,
        "ungradeable": reward is None,
        "correct": bool(reward),
        "metadata": metadata,
        "status": "ok",
    }


def test_eval_counts_void_episodes_and_leaves_them_out_of_every_mean() -> None:
    records = [
        _record(0, 1.0, {"outcome": "correct"}),
        _record(1, 0.0, {"outcome": "incorrect"}),
        _record(2, None, {"outcome": "ungradeable", "void": "the judge is down"}),
        _record(3, None, {"outcome": "ungradeable", "void": "the judge is down"}),
        _record(4, None, {"outcome": "ungradeable"}),  # the answer's: counts 0 in the mean of all
    ]
    s = summarize(records)
    assert s.outcomes["void"] == 2 and s.outcomes["ungradeable"] == 1
    assert s.episodes == 5 and s.tasks == 5
    assert s.reward_all.mean == pytest.approx(1 / 3)  # three counted episodes, the void ones out
    assert s.reward_graded.mean == pytest.approx(0.5)
    assert s.pass_at[1] == pytest.approx(0.5)  # over the graded episodes, as accuracy is
    assert not any(math.isnan(v) for v in s.pass_at.values())
