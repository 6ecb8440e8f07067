"""The answer tool and the episode it drives: attempts, dialogue turns, grading, rewards, feedback."""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from envbuilder.data import Task
from envbuilder.graders import Grade, Outcome
from envbuilder.protocol import RunToolError, ToolOutput, text_output
from envbuilder.world import json_copy

__all__ = ["Episode", "GradeCounts", "Reply", "finished_error", "grade_metadata", "output_of", "reward_of"]

log = logging.getLogger("envbuilder.episode")

MAX_USER_FAILURES = 3
"""Replies a simulated user may fail to give in one episode (each after its retries) before
the episode ends void."""

#: Grade details that hold the gold answer: the target itself, a pattern built from it, a
#: judge's reasoning about it, a state diff against the gold one, a code run's output (which may
#: quote the hidden tests). Shown only once the episode has finished and the spec sets
#: ``reveal_answer`` (a wrong answer's metadata must not let the agent resubmit the target or
#: read the tests).
GOLD_DETAILS = frozenset({"target", "pattern", "reasoning", "diff", "gold_errors", "run", "runs"})


def without_gold(details: dict[str, Any], into: dict[str, Any] | None = None) -> dict[str, Any]:
    """``details`` without :data:`GOLD_DETAILS`, also inside nested graders' summaries; written
    into ``into`` (which is returned) when given, as ``{**into, **without_gold(details)}``."""
    out: dict[str, Any] = {} if into is None else into
    for key, value in details.items():
        if key in GOLD_DETAILS:
            continue
        if isinstance(value, dict):
            value = without_gold(value)
        elif isinstance(value, list):
            value = [without_gold(v) if isinstance(v, dict) else v for v in value]
        out[key] = value
    return out


def grade_metadata(grade: Grade, reveal: bool, **extra: Any) -> dict[str, Any]:
    """What an answer's output says of its ``grade``: ``{outcome, score, reason, **extra,
    **details}``, the details without :data:`GOLD_DETAILS` unless ``reveal`` (the episode has
    finished and the spec sets ``reveal_answer``). Every output (or feedback) that shows a
    grade's details builds them here, so no path shows the gold answer while it still counts."""
    metadata: dict[str, Any] = {
        "outcome": grade.outcome._value_,  # (the plain str, without the enum's property)
        "score": grade.score,
        "reason": grade.reason,
        **extra,
    }
    if reveal:
        metadata.update(grade.details)
        return metadata
    return without_gold(grade.details, metadata)  # (written into it: no dict of its own)


@dataclass
class Episode:
    """The per-session state of an episode: small and serialisable (see :meth:`to_dict`)."""

    task: Task
    attempts: int = 0
    finished: bool = False
    secrets: dict[str, str] = field(default_factory=dict, repr=False)
    ungradeable: int = 0
    """Answers of this episode that could not be graded."""
    tool_state: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each tool's own per-session state, by tool name (plain JSON types; see envbuilder.tools)."""
    tool_calls: dict[str, int] = field(default_factory=dict)
    """Calls run so far, by tool name (for `max_calls`)."""
    cost: float = 0.0
    """Reward spent on tool calls (`cost:`), taken off the final reward."""
    transcript: list[dict[str, Any]] = field(default_factory=list)
    """The calls so far, in order: `{id, name, input, output, error}` (what `/messages` shows
    after the prompt); a call the simulated user made with its own tools also has `by: "user"`
    and the `round` of its reply (`/messages` leaves those out: they are not the agent's)."""
    replies: list[str] = field(default_factory=list)
    """A dialogue's graded replies so far (one per user turn answered)."""
    scores: list[float | None] = field(default_factory=list)
    """The reward of each reply when a dialogue is graded per turn."""
    void: str | None = None
    """Why a dialogue grade failed for a reason outside the agent's answer (the first such)."""
    sandbox: str | None = None
    """The name of the session's container (a spec's `sandbox:`), once a tool made it."""
    state: dict[str, Any] | None = None
    """The episode's changes to the spec's state document (``envbuilder.world.Changes``);
    None until a tool first reads it."""
    started: float | None = None
    """When the episode's first call came (seconds since the epoch, any replica's clock), kept
    when a `sandbox:` time limit (Harbor's `[agent] timeout_sec`) counts from it. Not its
    creation: a create retried after its answer was lost must store the same record."""

    @property
    def leaves_resources(self) -> bool:
        """Whether ending the episode has something to release (a tool's state, a container)."""
        return bool(self.tool_state) or self.sandbox is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        return cls(**data)


@dataclass(slots=True)
class Reply:
    """An answer's output before it is the wire's model: one text, its metadata, reward and
    end. The answer tool gives one for a graded answer; :meth:`output` is the ``ToolOutput``
    the server sends (one text block), made only by a caller that needs it (the in-process
    adapters read the four fields: an answer there builds no pydantic model)."""

    text: str
    metadata: dict[str, Any]
    reward: float | None
    finished: bool

    def output(self) -> ToolOutput:
        """``ToolOutput(blocks=[TextBlock(text=...)], metadata=..., reward=..., finished=...)``."""
        return text_output(self.text, self.metadata, self.reward, self.finished)


def output_of(out: Reply | ToolOutput | RunToolError) -> ToolOutput | RunToolError:
    """``out`` as the wire has it: a :class:`Reply` made a ``ToolOutput``, the rest as it is."""
    return out.output() if isinstance(out, Reply) else out


def reward_of(out: Reply | ToolOutput | RunToolError) -> float | None:
    """The reward a call's result carries (None for an error, which carries none)."""
    return out.reward if isinstance(out, Reply) or type(out) is ToolOutput else None


class GradeCounts:
    """How many answers an environment graded, by outcome (read by the server and catalog)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = {outcome.value: 0 for outcome in Outcome}

    def add(self, outcome: Outcome) -> None:
        with self._lock:  # (a str enum member finds its value's key: no `.value` lookup)
            self._counts[outcome] += 1

    @property
    def ungradeable(self) -> int:
        return self._counts[Outcome.UNGRADEABLE.value]

    @property
    def total(self) -> int:
        return sum(self._counts.values())

    def as_dict(self) -> dict[str, int]:
        """``{"correct": n, "incorrect": n, "ungradeable": n}``."""
        with self._lock:
            return dict(self._counts)


class _Saved:
    """What a turn of the simulated user may change, as it was before the turn (its tool calls
    change the state, the transcript, the counts): restored when the turn fails."""

    def __init__(self, episode: Episode):
        self.transcript = len(episode.transcript)
        self.state = json_copy(episode.state)
        self.tool_calls = dict(episode.tool_calls)
        self.tool_state = json_copy(episode.tool_state)
        self.cost = episode.cost

    def restore(self, episode: Episode) -> None:
        del episode.transcript[self.transcript :]
        episode.state = self.state
        episode.tool_calls = self.tool_calls
        episode.tool_state = self.tool_state
        episode.cost = self.cost


def finished_error(name: str) -> RunToolError:
    """What any call gets once the episode has finished (the [OR] latch)."""
    return RunToolError(
        error=f"{name!r} was not run: the episode has finished (a tool returned "
        "finished=True), so no further tool calls are accepted.",
        reason="episode_finished",
    )
