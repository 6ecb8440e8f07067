"""Re-grade a stored run under another version of its spec, without calling the model.

Every episode's recorded tool calls (and, in text mode, its submitted final messages) are
replayed in order on a fresh episode of the new spec: the new grader, answer conventions and
feedback decide the reward. An episode that ended in an error is kept as it was (there is no
answer to grade). The tasks must be the same (same ids at the same indices): a regrade changes
how answers are graded, not which questions were asked.

The result is a new run (its identity names the new spec's content hash, its header the run it
was regraded from) with the episodes whose reward or outcome changed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envbuilder.environment import Environment
from envbuilder.errors import EnvbuilderError
from envbuilder.eval._agent import absorb, conclude
from envbuilder.eval._records import RECORD_VERSION, RunFields, RunHeader
from envbuilder.eval._results import Summary, outcome_of, summarize
from envbuilder.eval._run import ResultsFile, RunIdentity, endpoint_identity, without_transcript
from envbuilder.eval._runner import task_fields
from envbuilder.inprocess import LocalEpisode
from envbuilder.paths import new_file

__all__ = ["Change", "Regrade", "regrade_run"]

_SAME_TASKS = "Regrade only changes grading: the new spec must serve the same tasks"


@dataclass(frozen=True)
class Change:
    """One episode whose grade changed."""

    split: str
    index: int
    sample: int
    task_id: str | None
    before: tuple[str, float | None]
    """(outcome, reward) in the stored run."""
    after: tuple[str, float | None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "split": self.split, "index": self.index, "sample": self.sample, "task_id": self.task_id,
            "before": {"outcome": self.before[0], "reward": self.before[1]},
            "after": {"outcome": self.after[0], "reward": self.after[1]},
        }  # fmt: skip


@dataclass(frozen=True)
class Regrade:
    header: RunHeader
    """The new run's header (``regraded_from`` names the stored run)."""
    before: Summary
    after: Summary
    changes: list[Change] = field(default_factory=list)
    replayed: int = 0
    """Episodes replayed (the rest ended in an error and are kept as they were)."""
    out: Path | None = None


def _user_text(messages: Any) -> str:
    """The text of every user turn of recorded chat ``messages`` (a string content, or the text
    parts of a list of parts), joined by newlines."""
    texts: list[str] = []
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(str(p["text"]) for p in content if isinstance(p, dict) and "text" in p)
    return "\n".join(texts)


def _same_question(episode: LocalEpisode, record: dict[str, Any], where: str) -> None:
    """Refuse a task whose prompt in the new spec is not what the run's model was asked.

    A run keeps only public task fields (often just the id), so two specs whose ids coincide
    (``test-0``) would pass the field comparison; the recorded conversation shows the question
    itself. An episode with no recorded user turn (it ended before the model was asked) is not
    compared."""
    asked = _user_text(record.get("messages"))
    if not asked:
        return
    for message in episode.messages():
        wanted = str(message["content"]).strip()
        if message["role"] == "user" and wanted and wanted not in asked:
            raise EnvbuilderError(
                f"{where} asks another question in the new spec (its prompt is not in the run's "
                "conversation)",
                hint=_SAME_TASKS,
                code="tasks_differ",
            )


async def _replay(env: Environment, record: dict[str, Any]) -> dict[str, Any]:
    split, index = str(record["split"]), int(record["index"])
    if index >= len(env.split(split)):
        raise EnvbuilderError(
            f"{split}[{index}] is in the run but the new spec's split has {len(env.split(split))} tasks",
            hint=_SAME_TASKS, code="tasks_differ",
        )  # fmt: skip
    task = env.split(split).task(index)
    # A run records the public fields (older runs, in-process, the private ones too): all are
    # compared, only public ones quoted (an error message never shows a gold answer).
    now, full, was = task_fields(env.public(task)), task_fields(task), record.get("task") or {}
    differs = [k for k in sorted(was.keys() & full.keys()) if was[k] != full[k]]
    if differs:
        k = differs[0]
        shown = f"{k}: {was[k]} in the run, {now[k]} now" if k in now else f"its private field {k!r} differs"
        where = f"{split}[{index}]"
        raise EnvbuilderError(
            f"{where} is another task in the new spec ({shown})", hint=_SAME_TASKS, code="tasks_differ"
        )
    episode = LocalEpisode(env, task)
    _same_question(episode, record, f"{split}[{index}]")
    new = {**record, "task": now, "reward": None, "finished": False, "metadata": None}
    calls = []
    for entry in record.get("tool_calls") or []:
        if new["finished"]:
            break
        entry = dict(entry)
        try:
            args = (
                json.loads(entry["arguments"])
                if isinstance(entry.get("arguments"), str)
                else entry.get("arguments")
            )
        except ValueError:
            args = None
        if isinstance(args, dict) and "error" not in entry:
            try:
                result = (await episode.run_tool(str(entry["name"]), args)).model_dump(mode="json")
            except Exception as exc:  # a tool bug is this episode's record, as in a live run
                result = {"ok": False, "error": f"the tool failed: {type(exc).__name__}: {exc}"}
            entry["result"] = result
            absorb(new, result)
        calls.append(entry)
    await episode.aend()  # what the replayed calls' tools hold is released, as in a live run
    new["tool_calls"] = calls
    new["status"] = (
        "finished" if new["finished"] else ("max_turns" if record.get("status") != "error" else "error")
    )
    conclude(new)
    return new


async def regrade_run(results: Path, env: Environment, out: Path | None = None) -> Regrade:
    """Replay the run in ``results`` on ``env`` (see the module docstring); write the new run to
    ``out`` when given.

    Raises:
        EnvbuilderError: ``results`` is not a run, or ``env`` serves other tasks.
    """
    from envbuilder.eval._backends import LocalBackend

    header, records = ResultsFile(results).load()
    old = RunIdentity.from_dict(header.run.model_dump())
    identity = RunIdentity(
        **{
            **old.to_dict(),
            "env": env.name,
            "env_hash": await LocalBackend(env).content_hash(),
            "server": None,
            "endpoints": endpoint_identity(env.endpoints),
        }
    )
    new_records, changes, replayed = [], [], 0
    for record in records:
        if record.get("status") == "error":
            new = dict(record)
        else:
            new = await _replay(env, record)
            replayed += 1
        new["run_id"] = identity.run_id
        before = (outcome_of(record), record.get("reward"))
        after = (outcome_of(new), new.get("reward"))
        if before != after:
            changes.append(Change(str(record["split"]), int(record["index"]), int(record.get("sample") or 0),
                                  record.get("task_id"), before, after))  # fmt: skip
        new_records.append(new)
    head = RunHeader(
        version=RECORD_VERSION,
        run=RunFields(**identity.to_dict()),
        run_id=identity.run_id,
        started=header.started,
        command=header.command,
        regraded_from=header.run_id,
    )
    if out is not None:
        with new_file(out) as f:
            f.write(json.dumps(head.to_dict(), ensure_ascii=False) + "\n")
            for r in new_records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    light = [without_transcript(r) for r in records]
    return Regrade(head, summarize(light), summarize(without_transcript(r) for r in new_records),
                   changes, replayed, out)  # fmt: skip
