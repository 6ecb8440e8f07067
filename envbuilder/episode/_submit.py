"""The `submit` tool: the agent's answer, graded; attempts, feedback and the episode's end."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ValidationError, create_model
from pydantic import Field as PydanticField

from envbuilder import deadlines
from envbuilder.data import Task
from envbuilder.episode._episode import (
    MAX_USER_FAILURES,
    Episode,
    GradeCounts,
    Reply,
    _Saved,
    finished_error,
    grade_metadata,
    output_of,
)
from envbuilder.episode.dialogue import Dialogue
from envbuilder.episode.simulated_user import Exchange, SimulatedUser, UserCall, UserUnavailable
from envbuilder.errors import EnvbuilderError, TemplateError
from envbuilder.graders import TRAJECTORY, Grade, Grader, Outcome, Trajectory, grade_off_loop
from envbuilder.protocol import (
    RunToolError,
    RunToolSuccess,
    TextBlock,
    ToolOutput,
    ToolSpec,
    call_result,
)
from envbuilder.spec import SubmitSpec
from envbuilder.templating import Template

log = logging.getLogger("envbuilder.episode")


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").split("_"))


class SubmitTool:
    """The ``submit`` tool of a spec: validates the input, grades it, builds the output.

    With a :class:`~envbuilder.episode.dialogue.Dialogue`, each reply reveals the next user turn as the
    output, and the episode's reward comes with the last reply.
    """

    def __init__(
        self,
        spec: SubmitSpec,
        grader: Grader,
        *,
        dialogue: Dialogue | None = None,
        transcript_grader: Grader | None = None,
        feedback: Template | None = None,
        user: SimulatedUser | None = None,
    ):
        self.spec = spec
        self.grader = grader
        self.dialogue = dialogue
        self.user = user
        self.trajectory_of: Callable[[Episode, str | None, str | None], Trajectory] | None = None
        """Builds what agent graders read of an episode (set by the toolbox that owns the
        tools and the state): the calls, the messages, the final state and a replay."""
        self.act: Callable[[Episode, str, dict[str, Any], int, str | None], Awaitable[UserCall]] | None = None
        """Runs and records one of the simulated user's tool calls (set by the toolbox when
        the user has tools of its own)."""
        self.transcript_grader = transcript_grader
        self.feedback = feedback
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
        self.reads_trajectory = grader.reads_trajectory
        """Whether the grader may read the episode's trajectory (built for its context only then)."""
        self._renders_targets = bool(grader.slow_targets())
        """Whether the grader has targets to render off the loop first (``grade_off_loop``)."""

    @property
    def blocking(self) -> bool:
        return (
            self.grader.blocking
            or bool(self.transcript_grader and self.transcript_grader.blocking)
            or self.user is not None
        )

    @property
    def task_free(self) -> bool:
        """Whether a call never asks for the running asyncio task before it first waits (see
        ``Grader.task_free``): a plain graded answer, by a grader that says so."""
        return self.dialogue is None and self.user is None and self.grader.task_free

    def target(self, task: Task) -> Any:
        """What ``task`` is graded against (None in a dialogue: its replies have no single target)."""
        return None if self.dialogue is not None else self.grader.target(task)

    def gold(self, task: Task) -> str | None:
        """An answer to ``task`` that earns full reward, when the grader knows one (``Grader.gold``;
        None in a dialogue)."""
        return None if self.dialogue is not None else self.grader.gold(task)

    def turn_targets(self, task: Task) -> list[Any]:
        """The grader's target for each reply (one, unless a dialogue grades each turn)."""
        if self.dialogue is None:
            return [self.grader.target(task)]
        count = self.dialogue.count(task)
        turns = range(count) if self.dialogue.spec.grade == "each" else [count - 1]
        return [self.grader.target(self.dialogue.context(task, [""] * (i + 1))) for i in turns]

    def answer_of(self, tool_input: dict[str, Any]) -> str | RunToolError:
        """The answer ``tool_input`` holds, through the input model (or its error)."""
        try:
            args = self.input_model.model_validate(tool_input)
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_input=False)
            return RunToolError(error=f"Tool input validation error: {errors}", reason="input_validation")
        return str(getattr(args, self.spec.answer_field))

    async def call(
        self, episode: Episode, name: str, tool_input: dict[str, Any]
    ) -> RunToolSuccess | RunToolError:
        """Run tool ``name``; tool-level failures are ``RunToolError``s, never exceptions."""
        if name != self.spec.name:
            return RunToolError(error=f"{name!r} is not a valid tool", reason="not_found")
        if episode.finished:
            return finished_error(name)
        out = await self.answer(episode, tool_input)
        return call_result(output_of(out))

    async def answer(self, episode: Episode, tool_input: dict[str, Any]) -> Reply | ToolOutput | RunToolError:
        """One answer (``tool_input``) of an episode that has not finished: its output (a graded
        answer's as a :class:`Reply`), or why the input was refused (what :meth:`call` returns,
        without the wire's model and wrapper)."""
        # The common call (a JSON object holding the answer as a string within its bound) is
        # what the input model accepts unchanged: no model round trip for it. Anything else
        # goes through the model, which gives the same answer or the same error as ever.
        answer = tool_input.get(self.spec.answer_field) if type(tool_input) is dict else None
        if type(answer) is not str or len(answer) > self.spec.max_answer_chars:
            answer = self.answer_of(tool_input)
            if isinstance(answer, RunToolError):
                return answer
        if self.dialogue is not None:
            return await self._reply(episode, answer, self.dialogue)
        if self.user is not None:
            return await self._converse(episode, answer, self.user)
        # (the common answer in one frame: the task itself as the context when the grader
        # reads no trajectory, the output built here when the feedback is not offloaded)
        context = (
            episode.task
            if self.trajectory_of is None or not self.reads_trajectory
            else self.context(episode, answer)
        )
        grade = await self._grade(self.grader, answer, context, episode.secrets)
        if self.feedback is None or self.feedback.bounded:
            return self.reply(episode, grade, answer)
        return await deadlines.offload(self.reply, episode, grade, answer)

    async def conclude(self, episode: Episode, answer: str) -> ToolOutput:
        """Grade ``episode`` now with ``answer`` as its last message, without asking the
        simulated user for a turn (``check`` replays gold trajectories this way)."""
        grade = await self._grade(self.grader, answer, self.context(episode, answer), episode.secrets)
        return await self._output(episode, grade, answer)

    def context(self, episode: Episode, message: str | None = None, reply: str | None = None) -> Task:
        """The grading context of ``episode``: its task and, when the toolbox gives one and
        the grader may read it, its trajectory (calls, messages, final state) under
        ``TRAJECTORY`` (a grader that reads only its fields grades the task row itself)."""
        if self.trajectory_of is None or not self.reads_trajectory:
            return episode.task
        return {**episode.task, TRAJECTORY: self.trajectory_of(episode, message, reply)}

    async def _converse(self, episode: Episode, message: str, user: SimulatedUser) -> ToolOutput:
        """One agent message to the simulated user: its reply, or the graded end of the episode.

        A reply the user's endpoint refuses or fails to give (after the retry policy's own
        retries) is not a turn, but it counts: at :data:`MAX_USER_FAILURES` of them the episode
        ends void (no reward: the failure is not the agent's), so an episode sends at most
        ``max_turns + MAX_USER_FAILURES - 1`` messages to the user, however many the agent
        sends."""
        dialogue, failures = self.exchanges(episode)
        turn_no = len(dialogue) + 1
        act = functools.partial(self.act, episode) if self.act is not None else None
        saved = _Saved(episode) if act is not None else None
        try:
            turn = await user.reply(episode.task, dialogue, message, episode.secrets, act)
        except UserUnavailable as exc:
            if saved is not None:  # a turn that failed changes nothing: its user's calls neither
                saved.restore(episode)
            failures += 1
            if failures >= MAX_USER_FAILURES:
                return self._user_gone(episode, exc, failures)
            text = f"{exc.message}; your message was not delivered, send it again"
            return ToolOutput(
                blocks=[TextBlock(text=f"Error: {text}")],
                metadata={"error": text, "user_failures": failures},
                finished=False,
            )
        acted = {"user_actions": [c.name for c in turn.calls]} if turn.calls else {}
        if not turn.stopped and turn_no < user.spec.max_turns:
            return ToolOutput(
                blocks=[TextBlock(text=turn.text)],
                metadata={"turn": turn_no, "max_turns": user.spec.max_turns, **acted},
                reward=None,
                finished=False,
            )
        context = self.context(episode, message, turn.text)
        grade = await self._grade(self.grader, message, context, episode.secrets)
        output = await self._output(episode, grade, message)
        why = (
            "The user ended the conversation." if turn.stopped else "The conversation reached its turn limit."
        )
        said = f"{turn.text}\n\n" if turn.text else ""
        text = "\n".join(b.text for b in output.blocks if isinstance(b, TextBlock))
        metadata = dict(output.metadata or {}, turn=turn_no, user_stopped=turn.stopped, **acted)
        episode.finished = True
        return ToolOutput(
            blocks=[TextBlock(text=f"{said}[{why} {text}]")],
            metadata=metadata,
            reward=output.reward,
            finished=True,
        )

    def exchanges(self, episode: Episode) -> tuple[list[Exchange], int]:
        """The conversation with the simulated user so far, from the transcript (the agent's
        messages, the user's tool calls and replies), and how many replies it failed to give."""
        name, field = self.spec.name, self.spec.answer_field
        dialogue: list[Exchange] = []
        calls: list[UserCall] = []
        failures = 0
        for e in episode.transcript:
            if e.get("by") == "user":
                calls.append(
                    UserCall(e["id"], e["name"], e["input"], e["output"], e["error"], e.get("round", 0))
                )
            elif e["name"] != name:
                continue
            elif e["error"]:
                failures += 1
            else:
                dialogue.append(Exchange(str(e["input"].get(field, "")), e["output"], tuple(calls)))
                calls = []
        return dialogue, failures

    def _user_gone(self, episode: Episode, exc: UserUnavailable, failures: int) -> ToolOutput:
        """The void end of an episode whose simulated user keeps failing: finished, no reward,
        the reason in the metadata (counted as an ungradeable grade)."""
        reason = (
            f"the simulated user failed {failures} times, so the episode ends void (no reward): {exc.message}"
        )
        log.warning("an episode ends void: %s", reason)
        self.counts.add(Outcome.UNGRADEABLE)
        episode.ungradeable += 1
        episode.finished = True
        return ToolOutput(
            blocks=[TextBlock(text=f"Error: {reason}")],
            metadata={
                "outcome": Outcome.UNGRADEABLE.value,
                "score": None,
                "reason": reason,
                "void": reason,
                "user_failures": failures,
            },
            reward=None,
            finished=True,
        )

    async def _grade(self, grader: Grader, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        try:
            if grader is self.grader and not self._renders_targets:
                grade = await grader.grade(answer, task, secrets)  # (grade_off_loop's, in one frame less)
            else:
                grade = await grade_off_loop(grader, answer, task, secrets)
        except TemplateError as exc:  # a target that cannot render on this task (its budget)
            log.warning("grader %s: %s", grader.type_name, exc.message)
            grade = Grade.failed(f"the grader's template failed: {exc.message}")
        except Exception as exc:  # a grader bug must not crash the server, nor score 0
            log.exception("grader %s failed", grader.type_name)
            grade = Grade.failed(f"the grader failed: {type(exc).__name__}")
        self.counts.add(grade.outcome)
        return grade

    def _reward(self, score: float | None) -> float | None:
        spec = self.spec
        return (
            None
            if score is None
            else spec.reward_incorrect + score * (spec.reward_correct - spec.reward_incorrect)
        )

    async def _reply(self, episode: Episode, answer: str, dialogue: Dialogue) -> ToolOutput:
        """One reply of a dialogue: record it, grade it when due, reveal the next turn."""
        task, spec = episode.task, dialogue.spec
        episode.replies.append(answer)
        total = dialogue.count(task)
        last = len(episode.replies) >= total
        metadata: dict[str, Any] = {"turn": len(episode.replies) - 1, "turns": total}
        if spec.grade == "each" or last:
            grade = await self._grade(
                self.grader, answer, dialogue.context(task, episode.replies), episode.secrets
            )
            episode.scores.append(grade.score)
            if grade.void:
                episode.void = episode.void or grade.reason
            metadata.update(grade_metadata(grade, last and self.spec.reveal_answer))
            metadata["turn_reward"] = self._reward(grade.score)
        if not last:
            turns = (
                dialogue.user_turns(task, episode.replies)
                if dialogue.inline
                else await deadlines.offload(dialogue.user_turns, task, episode.replies)
            )
            return ToolOutput(
                blocks=[TextBlock(text=turns[-1])], metadata=metadata, reward=None, finished=False
            )
        episode.finished = True
        score: float | None
        if spec.reward == "grader":
            assert self.transcript_grader is not None
            context = dialogue.context(task, episode.replies)
            final = await self._grade(self.transcript_grader, context["transcript"], context, episode.secrets)
            score = final.score
            if final.void:
                episode.void = final.reason
            metadata["transcript_grade"] = {
                "outcome": final.outcome.value,
                "score": score,
                "reason": final.reason,
            }
        elif spec.reward == "last":
            score = episode.scores[-1]
        elif None in episode.scores:
            score = None
        else:
            scores = [s for s in episode.scores if s is not None]
            score = sum(scores) / len(scores) if spec.reward == "mean" else min(scores)
        metadata["scores"] = list(episode.scores)
        void = episode.void if score is None else None
        if score is None:
            episode.ungradeable += 1
            policy = "incorrect" if self.spec.on_ungradeable == "incorrect" and not void else "no_reward"
            if void:
                metadata["void"] = void
            metadata["ungradeable_policy"] = policy
            reward = self.spec.reward_incorrect if policy == "incorrect" else None
            text = "The dialogue is over, but it could not be graded."
        else:
            reward = self._reward(score)
            text = "The dialogue is over."
        metadata["episode_score"] = score
        return ToolOutput(
            blocks=[TextBlock(text=text)],
            metadata=metadata,
            reward=self.charge(episode, reward, metadata),
            finished=True,
        )

    @staticmethod
    def charge(episode: Episode, reward: float | None, metadata: dict[str, Any]) -> float | None:
        """``reward`` less what the episode's tool calls cost (recorded in ``metadata``)."""
        if episode.cost:
            metadata["cost"] = episode.cost
            if reward is not None:
                return reward - episode.cost
        return reward

    async def _output(self, episode: Episode, grade: Grade, answer: str) -> ToolOutput:
        """:meth:`output`, off the event loop when the spec's feedback template does more than
        show fields (its render waits for a render process)."""
        if self.feedback is None or self.feedback.bounded:
            return self.output(episode, grade, answer)
        return await deadlines.offload(self.output, episode, grade, answer)

    def output(self, episode: Episode, grade: Grade, answer: str = "") -> ToolOutput:
        """Count the attempt, apply the rewards and the ungradeable policy, say what happened
        (:meth:`reply`, as the wire's model)."""
        return self.reply(episode, grade, answer).output()

    def reply(self, episode: Episode, grade: Grade, answer: str = "") -> Reply:
        """Count the attempt, apply the rewards and the ungradeable policy, say what happened."""
        spec = self.spec
        ungradeable = grade.outcome is Outcome.UNGRADEABLE
        policy = spec.on_ungradeable if ungradeable else None
        if grade.void and policy == "incorrect":
            policy = "no_reward"  # the environment failed, not the answer: void, never 0
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
            reward = self._reward(score)
            text = (
                "Correct!"
                if full
                else "Incorrect."
                if score <= 0
                else f"Partially correct (score {score:.2f})."
            )
        if self.feedback is not None and not ungradeable:
            text = self._feedback(episode, grade, answer, left, finished) or text
        elif not finished:
            text += f" You have {left} attempt{'s' if left != 1 else ''} left."
        if finished and not full and spec.reveal_answer:
            target = self.target(episode.task)
            if target is not None:
                text += f" The correct answer is {target}."
        metadata = grade_metadata(
            grade, finished and spec.reveal_answer, attempt=episode.attempts, max_attempts=spec.max_attempts
        )
        if ungradeable:
            metadata["ungradeable_policy"] = policy
            metadata["ungradeable_count"] = episode.ungradeable
        if grade.void:
            metadata["void"] = grade.reason
        if not finished:
            # The one reward convention (README, "Rewards"): only the call that ends the episode
            # carries a reward, so summing the step rewards and taking the last non-null one
            # read the same number. An attempt's own reward is information, in metadata.
            metadata["attempt_reward"] = reward
            return Reply(text, metadata, None, False)
        if episode.cost:
            reward = self.charge(episode, reward, metadata)
        return Reply(text, metadata, reward, finished)

    def _feedback(self, episode: Episode, grade: Grade, answer: str, left: int, finished: bool) -> str | None:
        """The spec's feedback text; None (the default text) when the template fails."""
        assert self.feedback is not None
        context = {
            **episode.task,
            "outcome": grade.outcome.value,
            "score": grade.score,
            "reason": grade.reason,
            "attempt": episode.attempts,
            "attempts_left": left,
            "finished": finished,
            "answer": answer,
            "grade": grade_metadata(grade, finished and self.spec.reveal_answer),
        }
        try:
            return self.feedback.render(context).strip()
        except EnvbuilderError as exc:
            log.warning("the feedback template failed: %s", exc.message)
            return None
