"""The answer tool and the episode it drives: attempts, grading, rewards, the finished latch."""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError, create_model
from pydantic import Field as PydanticField

from envbuilder.data import Task
from envbuilder.graders import Grade, Grader, Outcome
from envbuilder.protocol import RunToolError, RunToolSuccess, TextBlock, ToolOutput, ToolSpec
from envbuilder.spec import SubmitSpec

__all__ = ["Episode", "GradeCounts", "SubmitTool"]

log = logging.getLogger("envbuilder.episode")


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
    after the prompt)."""
    replies: list[str] = field(default_factory=list)
    """A dialogue's graded replies so far (one per user turn answered)."""
    scores: list[float | None] = field(default_factory=list)
    """The reward of each reply when a dialogue is graded per turn."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        return cls(**data)


class GradeCounts:
    """How many answers an environment graded, by outcome (read by the server and catalog)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = {outcome.value: 0 for outcome in Outcome}

    def add(self, outcome: Outcome) -> None:
        with self._lock:
            self._counts[outcome.value] += 1

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


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").split("_"))


class SubmitTool:
    """The ``submit`` tool of a spec: validates the input, grades it, builds the output."""

    def __init__(self, spec: SubmitSpec, grader: Grader):
        self.spec = spec
        self.grader = grader
        self.counts = GradeCounts()
        self.input_model: type[BaseModel] = create_model(  # type: ignore[call-overload]
            f"{_camel(spec.name)}Input",
            **{
                spec.answer_field: (
                    str,
                    PydanticField(description=spec.answer_description, max_length=spec.max_answer_chars),
                )
            },
        )
        self.tool_spec = ToolSpec(
            name=spec.name, description=spec.description, input_schema=self.input_model.model_json_schema()
        )

    @property
    def blocking(self) -> bool:
        return self.grader.blocking

    async def call(
        self, episode: Episode, name: str, tool_input: dict[str, Any]
    ) -> RunToolSuccess | RunToolError:
        """Run tool ``name``; tool-level failures are ``RunToolError``s, never exceptions."""
        if name != self.spec.name:
            return RunToolError(error=f"{name!r} is not a valid tool", reason="not_found")
        if episode.finished:
            return RunToolError(
                error=f"{name!r} was not run: the episode has finished (a tool returned "
                "finished=True), so no further tool calls are accepted.",
                reason="episode_finished",
            )
        try:
            args = self.input_model.model_validate(tool_input)
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_input=False)
            return RunToolError(error=f"Tool input validation error: {errors}", reason="input_validation")
        answer: str = getattr(args, self.spec.answer_field)
        try:
            grade = await self.grader.grade(answer, episode.task, episode.secrets)
        except Exception as exc:  # a grader bug must not crash the server, nor score 0
            log.exception("grader %s failed", self.grader.type_name)
            grade = Grade.ungradeable(f"the grader failed: {type(exc).__name__}")
        self.counts.add(grade.outcome)
        return RunToolSuccess(output=self.output(episode, grade))

    def output(self, episode: Episode, grade: Grade) -> ToolOutput:
        """Count the attempt, apply the rewards and the ungradeable policy, say what happened."""
        spec = self.spec
        ungradeable = grade.outcome is Outcome.UNGRADEABLE
        policy = spec.on_ungradeable if ungradeable else None
        if ungradeable:
            episode.ungradeable += 1
            if policy == "retry" and episode.ungradeable > spec.max_attempts:
                policy = "no_reward"  # an endless loop of unjudgeable answers must end
        if policy != "retry":
            episode.attempts += 1
        left = spec.max_attempts - episode.attempts
        full = grade.outcome is Outcome.CORRECT and (grade.score or 0.0) >= 1.0
        episode.finished = finished = full or left <= 0
        reward: float | None
        if policy == "incorrect":
            reward = spec.reward_incorrect
            text = f"Your answer could not be graded ({grade.reason}), so it counts as incorrect."
        elif ungradeable:
            reward = None
            text = f"Your answer could not be graded: {grade.reason}."
            if policy == "retry":
                text += " This attempt was not counted; submit your answer again."
        else:
            score = grade.score or 0.0
            reward = spec.reward_incorrect + score * (spec.reward_correct - spec.reward_incorrect)
            text = (
                "Correct!"
                if full
                else "Incorrect."
                if score <= 0
                else f"Partially correct (score {score:.2f})."
            )
        if not finished:
            text += f" You have {left} attempt{'s' if left != 1 else ''} left."
        elif not full and spec.reveal_answer:
            target = self.grader.target(episode.task)
            if target is not None:
                text += f" The correct answer is {target}."
        metadata: dict[str, Any] = {
            "outcome": grade.outcome.value,
            "score": grade.score,
            "reason": grade.reason,
            "attempt": episode.attempts,
            "max_attempts": spec.max_attempts,
            **grade.details,
        }
        if ungradeable:
            metadata["ungradeable_policy"] = policy
            metadata["ungradeable_count"] = episode.ungradeable
        return ToolOutput(blocks=[TextBlock(text=text)], metadata=metadata, reward=reward, finished=finished)
