"""verifiers: a spec as a verifiers environment, for ``vf-eval`` and prime-rl.

``load_environment(spec=..., split=...)`` is the module-level entry point verifiers looks up, so
``vf-eval envbuilder.integrations.verifiers -a '{"spec": "envs/gsm8k_tools.yaml"}'`` loads it by
name. The dataset holds each task's conversation as the spec renders it (never a gold field: the
``answer`` column is empty and ``info`` carries only the task's index); the tools are the spec's
own, with their JSON schemas, run through an in-process episode; the rubric's one reward is the
episode's reward. A reply without a tool call is the final answer: when the episode has not ended
yet, it is submitted through the spec's answer tool when the rubric scores the rollout.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

try:
    import verifiers as vf
except ImportError as exc:  # an optional extra
    hint = "envbuilder.integrations.verifiers needs verifiers: pip install 'envbuilder[verifiers]'"
    raise ImportError(hint) from exc

from envbuilder.environment import Environment
from envbuilder.errors import DataError
from envbuilder.integrations._local import LocalEpisode, describe, environment

_EPISODE = "envbuilder_episode"
"""The ``state`` key holding a rollout's :class:`LocalEpisode`."""


class SpecEnv(vf.MultiTurnEnv):
    """A verifiers multi-turn environment over a spec: one episode per rollout, the spec's tools
    offered as native tool calls, and the episode's reward as the score.

    Its training dataset is the spec's train split and its evaluation dataset the split
    evaluation plays (a test split, else validation: :meth:`Environment.evaluation_split`); a
    spec without a train split has no training dataset, so a trainer never trains on held-out
    rows. ``split`` names one split for both instead. Each dataset's prompts are rendered when
    verifiers first asks for it (``vf-eval`` renders only the evaluation split)."""

    def __init__(
        self,
        env: Environment,
        split: str | None = None,
        num_tasks: int | None = None,
        max_turns: int = 10,
        secrets: dict[str, str] | None = None,
    ):
        evaluated = split if split is not None else env.evaluation_split()
        trained = split if split is not None else env.training_split()
        self.env, self.split, self.secrets = env, evaluated, dict(secrets or {})
        self.num_tasks = num_tasks
        view = env.split(evaluated)  # (an unknown split fails here, not when a dataset is built)
        tools = env.task_tools(view.task(0)).tools if len(view) else []
        super().__init__(
            dataset=None if trained is None else functools.partial(self._dataset, trained),
            eval_dataset=functools.partial(self._dataset, evaluated),
            tool_defs=[
                {"name": t.name, "description": t.description or t.name, "parameters": t.input_schema or {}}
                for t in tools
            ],
            rubric=vf.Rubric(funcs=[self.episode_reward, self.graded], weights=[1.0, 0.0]),
            max_turns=max_turns,
        )

    def _dataset(self, split: str) -> Any:
        """The rollouts' dataset of ``split``: each task's conversation as the spec renders it,
        no gold (``answer`` is empty), and where the task is (``info``: its split and index)."""
        from datasets import Dataset

        n = len(self.env.split(split))
        n = n if self.num_tasks is None else min(self.num_tasks, n)
        episodes = [LocalEpisode.of(self.env, split, i) for i in range(n)]
        return Dataset.from_dict(
            {
                "prompt": [e.messages() for e in episodes],
                "answer": [""] * n,  # the gold stays in the spec
                "info": [{"split": split, "task_index": i} for i in range(n)],
            }
        )

    def _episode(self, state: vf.State) -> LocalEpisode:
        episode: LocalEpisode = state[_EPISODE]
        return episode

    async def setup_state(self, state: vf.State) -> vf.State:
        info = state.get("info") or {}
        if isinstance(info, str):
            info = json.loads(info)
        split = str(info.get("split") or self.split)  # (a row without one: the evaluation split)
        state[_EPISODE] = LocalEpisode.of(self.env, split, int(info.get("task_index", 0)), self.secrets)
        return state

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        episode = self._episode(state)
        replies = []
        for call in messages[-1].tool_calls or []:
            try:
                arguments = json.loads(call.arguments or "{}")
                if not isinstance(arguments, dict):
                    raise ValueError("the arguments must be a JSON object")
            except ValueError as exc:
                text = f"Error: {exc}"
            else:
                text = describe(await episode.astep(call.name, arguments))
            replies.append(vf.ToolMessage(role="tool", content=text, tool_call_id=call.id))
            if episode.finished:
                state["final_env_response"] = replies
                break
        return replies

    @vf.stop
    async def answered(self, state: vf.State) -> bool:
        """A reply without a tool call is the final answer (submitted when scored)."""
        trajectory = state["trajectory"]
        if not trajectory:
            return False
        last = trajectory[-1]["completion"][-1]
        return bool(last.role == "assistant" and not getattr(last, "tool_calls", None))

    @vf.cleanup
    async def end_episode(self, state: vf.State) -> None:
        """Submit a final reply the episode has not graded yet, then release the episode."""
        episode = state.get(_EPISODE)
        if episode is None:
            return
        submit = self.env.submit
        completion = state.get("completion") or []
        last = completion[-1] if completion else None
        if (
            not episode.finished
            and submit is not None
            and last is not None
            and last.role == "assistant"
            and not getattr(last, "tool_calls", None)
        ):
            content = last.content if isinstance(last.content, str) else ""
            await episode.astep(submit.spec.name, {submit.spec.answer_field: content})
        state["envbuilder_reward"] = reward = episode.reward
        state["envbuilder_rewards"] = list(episode.rewards)
        if reward is None and episode.void is not None and state.get("error") is None:
            # verifiers' mark of a rollout the infrastructure spoiled (as its own sandbox
            # environments set it): saved as the output's `error`, skipped by trainers.
            state["error"] = vf.InfraError(f"the episode is void: {episode.void}")
        await episode.aend()
        del state[_EPISODE]

    async def episode_reward(self, state: vf.State, **_: Any) -> float:
        """The episode's reward (0.0 when nothing was graded: see the ``graded`` metric)."""
        reward = state.get("envbuilder_reward")
        return 0.0 if reward is None else float(reward)

    async def graded(self, state: vf.State, **_: Any) -> float:
        """1.0 when the episode gave a reward, 0.0 when nothing was graded (or ungradeable)."""
        return float(state.get("envbuilder_reward") is not None)


def load_environment(
    spec: str | Path | Environment,
    split: str | None = None,
    num_tasks: int | None = None,
    max_turns: int = 10,
    secrets: dict[str, str] | None = None,
) -> SpecEnv:
    """The verifiers environment of ``spec``: the train split to train on, the test split to
    evaluate on, or ``split`` for both (:class:`SpecEnv`); ``num_tasks`` caps each dataset;
    ``secrets`` are every episode's session secrets, such as a judge's API key."""
    return SpecEnv(environment(spec), split, num_tasks=num_tasks, max_turns=max_turns, secrets=secrets)


def load_exported(
    pack: Path,
    pack_sha256: str,
    content_hash: str,
    split: str | None = None,
    num_tasks: int | None = None,
    max_turns: int = 10,
    secrets: dict[str, str] | None = None,
) -> SpecEnv:
    """The environment of a package ``envbuilder export verifiers`` wrote: its pack, refused
    unless its sha256 and the environment's content hash are the ones the package pins.

    The pack's code (``function`` tools, ``mcp`` commands) runs: installing the package was the
    user's decision to run it, as for any verifiers environment package.
    """
    from envbuilder.catalog import content_hash as hash_of
    from envbuilder.catalog import file_sha256, load_pack

    got = file_sha256(pack)
    if got != pack_sha256:
        raise DataError(
            f"the pack {str(pack)!r} hashes to {got}, the package pins {pack_sha256}",
            hint="The installed package was changed; install it again",
            code="pack_mismatch",
        )
    env = load_pack(pack, trust_code=True)
    held = hash_of({name: file_sha256(path) for name, path in env.files.items()})
    if held != content_hash:
        raise DataError(
            f"the pack {str(pack)!r} holds environment {held}, the package pins {content_hash}",
            hint="The installed package was changed; install it again",
            code="pack_mismatch",
        )
    return SpecEnv(env, split, num_tasks=num_tasks, max_turns=max_turns, secrets=secrets)


__all__ = ["SpecEnv", "load_environment", "load_exported"]
