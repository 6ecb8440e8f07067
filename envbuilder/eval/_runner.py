"""Run episodes concurrently, append each to the run's results file, resume a stopped run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envbuilder.errors import EnvbuilderError
from envbuilder.eval._agent import run_episode
from envbuilder.eval._answer import AnswerMode, AnswerTool, choose_answer_tool
from envbuilder.eval._backends import EvalBackend
from envbuilder.eval._records import RECORD_VERSION
from envbuilder.eval._results import check_group_by
from envbuilder.eval._run import EpisodeKey, ResultsFile, RunIdentity, endpoint_identity, without_transcript
from envbuilder.llm import ChatModel
from envbuilder.spec import evaluation_split

__all__ = ["EvalPlan", "plan_eval", "run_eval"]

# Task fields longer than this are not copied into the records (they are for grouping).
_FIELD_CHARS = 200
# Fields of a task's objects (``meta.level``) copied at most, and how deep.
_NESTED_FIELDS = 32
_NESTED_DEPTH = 3


@dataclass(frozen=True)
class EvalPlan:
    identity: RunIdentity
    episodes: list[EpisodeKey]
    """Every episode of the run, in order: (split, index, sample)."""
    todo: list[EpisodeKey]
    """Episodes without a record that ended without an error (the rest are kept)."""
    done: dict[EpisodeKey, dict[str, Any]] = field(default_factory=dict)
    results: ResultsFile | None = None
    answer_tool: AnswerTool | None = None
    """``--answer text``: the tool the model's final message is submitted to."""
    split_type: str | None = None
    """What the split is for (``train``, ``validation`` or ``test``), as the environment says."""

    @property
    def env(self) -> str:
        return self.identity.env

    @property
    def split(self) -> str:
        return self.identity.split


async def plan_eval(
    backend: EvalBackend,
    model: ChatModel,
    *,
    split: str | None,
    limit: int | None,
    samples: int = 1,
    max_turns: int = 10,
    out: Path | None = None,
    command: str | None = None,
    answer: AnswerMode = "tool",
    group_by: str | None = None,
) -> EvalPlan:
    """The run's identity and the episodes still to play.

    Raises:
        RunMismatch: ``out`` holds another run.
        EnvbuilderError: an unknown split, a ``group_by`` field the tasks lack, ``answer="text"``
            on an environment without an answer tool.
    """
    listed = await backend.splits()
    splits = [s.name for s in listed]
    if split is None:
        split = evaluation_split((s.name, s.type) for s in listed)
        if split is None:
            raise EnvbuilderError(f"{backend.env_name} has no splits", code="invalid_split")
    elif split not in splits:
        raise EnvbuilderError(
            f"unknown split {split!r}", hint=f"Splits: {', '.join(splits)}", code="invalid_split"
        )
    if answer not in ("tool", "text"):
        raise EnvbuilderError(f"--answer {answer!r}: expected tool or text", code="invalid_option")
    n = await backend.num_tasks(split)
    if group_by is not None and group_by.split(".")[0] in backend.private_fields:
        raise EnvbuilderError(
            f"--group-by {group_by!r}: a private field of {backend.env_name}'s tasks (what the grader "
            "reads), which runs do not record",
            hint="Group by a field the tasks show (as /task returns them)",
            code="private_field",
        )
    if group_by is not None and n:
        check_group_by(group_by, task_fields(await backend.first_task(split)), f"{backend.env_name}'s tasks")
    answer_tool = (
        choose_answer_tool(backend.env_name, await backend.tool_listing()) if answer == "text" else None
    )
    identity = RunIdentity(
        env=backend.env_name, env_hash=await backend.content_hash(), server=backend.server,
        split=split, limit=limit, model=model.model, endpoint=model.base_url,
        sampling=model.sampling.to_dict(), samples=samples, max_turns=max_turns, answer=answer,
        endpoints=endpoint_identity(backend.endpoints),
    )  # fmt: skip
    episodes = [
        (split, i, s) for i in range(n if limit is None else min(n, max(0, limit))) for s in range(samples)
    ]
    results = ResultsFile(out) if out is not None else None
    earlier = results.open_for(identity, command) if results is not None else {}
    wanted = set(episodes)
    done = {k: r for k, r in earlier.items() if r.get("status") != "error" and k in wanted}
    todo = [k for k in episodes if k not in done]
    kind = next((s.type for s in listed if s.name == split), None)
    return EvalPlan(identity, episodes, todo, done, results, answer_tool, split_type=kind)


def task_fields(task: dict[str, Any]) -> dict[str, Any]:
    """The task's short scalar fields, kept in the record so results can be grouped later:
    its own, then those of its objects by dotted name (``metadata.difficulty``), at most
    :data:`_NESTED_FIELDS` of those, :data:`_NESTED_DEPTH` deep."""
    fields = {
        k: v for k, v in task.items()
        if isinstance(v, (str, int, float, bool)) and len(str(v)) <= _FIELD_CHARS
    }  # fmt: skip
    nested: dict[str, Any] = {}
    for k, v in task.items():
        if type(v) is dict:
            _nested_fields(v, f"{k}.", 1, nested)
    for name, value in nested.items():
        fields.setdefault(name, value)  # (a field whose own name has a dot keeps its value)
    return fields


def _nested_fields(value: dict[str, Any], prefix: str, depth: int, into: dict[str, Any]) -> None:
    for k, v in value.items():
        if len(into) >= _NESTED_FIELDS:
            return
        if isinstance(v, (str, int, float, bool)):
            if len(str(v)) <= _FIELD_CHARS:
                into[f"{prefix}{k}"] = v
        elif type(v) is dict and depth < _NESTED_DEPTH:
            _nested_fields(v, f"{prefix}{k}.", depth + 1, into)


async def run_eval(
    backend: EvalBackend,
    model: ChatModel,
    plan: EvalPlan,
    *,
    concurrency: int = 4,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> list[dict[str, Any]]:
    """Play every episode of ``plan.todo``; the records of all of ``plan.episodes`` in order
    (including those an earlier run into the same file finished). With a results file the
    records come without their transcripts (``messages``, ``tool_calls``): those are in the file.

    ``stop`` (e.g. a spent budget) is asked before each episode starts: once it says yes, no
    new episode starts, those under way finish, and the rest stay to do for a resumed run."""
    queue: asyncio.Queue[EpisodeKey] = asyncio.Queue()
    for key in plan.todo:
        queue.put_nowait(key)
    new: dict[EpisodeKey, dict[str, Any]] = {}
    sink = plan.results.path.open("a", encoding="utf-8") if plan.results is not None else None
    run_id = plan.identity.run_id

    async def one(key: EpisodeKey) -> dict[str, Any]:
        split, index, sample = key
        head: dict[str, Any] = {
            "version": RECORD_VERSION,
            "run_id": run_id,
            "env": plan.env,
            "split": split,
            "index": index,
            "sample": sample,
            "model": model.model,
        }
        try:
            async with backend.episode(split, index) as handle:
                head["task"] = task_fields(handle.task)
                record = await run_episode(handle, model, plan.identity.max_turns, plan.answer_tool)
        except Exception as exc:  # the environment failed: this episode's error, not the run's
            record = {
                "status": "error",
                "error": f"{type(exc).__name__}: {exc}",
                "error_reason": f"environment ({type(exc).__name__})",
                "reward": None,
                "finished": False,
                "turns": 0,
                "usage": {},
                "messages": [],
                "tool_calls": [],
            }
        return {**head, **record}

    async def worker() -> None:
        while stop is None or not stop():
            try:
                key = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            record = await one(key)
            if sink is not None:
                sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                sink.flush()
            # Once on disk, the transcript is not kept: a long run's memory stays small.
            new[key] = without_transcript(record) if sink is not None else record
            if on_record is not None:
                on_record(record)

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    finally:
        if sink is not None:
            sink.close()
    return [new.get(k) or plan.done[k] for k in plan.episodes if k in new or k in plan.done]
