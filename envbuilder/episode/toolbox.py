"""An environment's tools: the answer tool and the `tools:` of its spec, behind one dispatch.

The toolbox owns the rules every call follows whatever its tool: the finished latch, input
validation against the declared schema, ``max_calls``, the reward ``cost`` of a call,
``terminal`` tools, output bounds, and the episode's transcript (what ``/messages`` shows after
the prompt). A tool type only runs a call (:mod:`envbuilder.tools`).

It also runs the simulated user's own tools (``user.tools``, dual control) under the same
rules, on the same state: they are never listed nor callable by the agent, their calls are
recorded with ``by: "user"``, and graders see both sides' calls.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from functools import cached_property
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from envbuilder.episode import Episode, Reply, SubmitTool, finished_error, output_of
from envbuilder.episode.simulated_user import UserCall
from envbuilder.errors import SandboxError, ToolError
from envbuilder.graders import Trajectory
from envbuilder.graders._trajectory import BROKE
from envbuilder.isolation.sandbox import SessionContainers, Workspace, new_name
from envbuilder.protocol import (
    MESSAGE_BLOCK_TYPES,
    ListToolsOutput,
    Message,
    RunToolError,
    RunToolSuccess,
    TerminalToolSpec,
    TextBlock,
    ToolCallBlock,
    ToolOutput,
    ToolResultBlock,
    ToolSpec,
    call_result,
)
from envbuilder.tools import Tool, ToolCall, input_model
from envbuilder.world import Document, World

__all__ = ["Toolbox"]

log = logging.getLogger("envbuilder.tools")

MAX_TRANSCRIPT = 200
"""Calls an episode may make in all: a session stays small (see ``Episode.transcript``)."""
_TRANSCRIPT_FULL = f"this episode has made {MAX_TRANSCRIPT} tool calls, the most it may make"
MAX_STATE_CHANGES = 1_000_000
"""Bytes (as JSON) an episode's changes to its state document may take: a call that would grow
them past it fails and changes nothing."""


class _Declared:
    """A tool of `tools:` with its input model and offered spec, built once."""

    def __init__(self, tool: Tool):
        self.tool = tool
        self.config = tool.config
        own = tool.input_model()
        params = tool.config.input if tool.config.input is not None else tool.default_input
        self.model: type[BaseModel] = own if own is not None else input_model(tool.name, params)
        self.spec = ToolSpec(
            name=tool.name,
            description=tool.config.description or tool.description,
            input_schema=self.model.model_json_schema(),
        )


class Toolbox:
    """The tools of one environment, and the per-call rules."""

    def __init__(
        self,
        submit: SubmitTool,
        tools: Iterable[Tool],
        document: Document | None = None,
        containers: SessionContainers | None = None,
        *,
        user_tools: Iterable[Tool] = (),
    ):
        self.submit = submit
        self.document = document
        """The initial state document (`state:`), or None."""
        self.containers = containers
        """The session containers of a spec's `sandbox:`, or None."""
        self.declared = {t.name: _Declared(t) for t in tools}
        declared = list(self.declared.values())
        spec = submit.spec
        self._terminal = (
            TerminalToolSpec(name=spec.name, arg=spec.answer_field, description=spec.description)
            if spec.terminal_tool
            else None
        )
        shared = [d.spec for d in declared if not (d.config.task_scoped or d.config.only_for)]
        self.listing = self._listing([submit.tool_spec, *shared])
        """``/tools``: the answer tool and the shared tools."""
        self.task_listing = self._listing([submit.tool_spec] + [d.spec for d in declared])
        """``/task_tools``: every tool, the task-scoped ones included."""
        self.varies = any(d.config.only_for for d in declared)
        """Whether a session's tools depend on its task (``only_for``)."""
        self.user_declared = {t.name: _Declared(t) for t in user_tools}
        """The simulated user's own tools (`user.tools`): never offered to the agent."""
        self.cleanup = containers is not None or any(
            type(d.tool).end_session is not Tool.end_session
            for d in [*self.declared.values(), *self.user_declared.values()]
        )
        """Whether some tool releases per-session resources when a session ends."""
        self.answer_tool = spec.name if containers is None and spec.name not in self.declared else None
        """The answer tool's name when :meth:`answer` runs its calls: in an environment without
        session containers (whose time limit a call enforces), else None."""
        submit.trajectory_of = self.trajectory
        if self.user_declared and submit.user is not None:
            submit.user.offer([d.spec for d in self.user_declared.values()])
            submit.act = self.user_call

    def _listing(self, specs: list[ToolSpec]) -> ListToolsOutput:
        return ListToolsOutput(
            tools=specs,
            terminal_tool=self._terminal,
            supports_score_group=False,
            message_block_types=MESSAGE_BLOCK_TYPES,
        )

    def task_listing_for(self, task: dict[str, Any]) -> ListToolsOutput:
        """``/task_tools`` of a session on ``task``: without the tools its task lacks."""
        if not self.varies:
            return self.task_listing
        specs = [self.submit.tool_spec] + [d.spec for d in self.declared.values() if _offered(d, task)]
        return self._listing(specs)

    @cached_property
    def taskless(self) -> frozenset[str]:
        """The tools whose calls never ask for the running asyncio task before they first wait
        (synchronous callers start them without one: :func:`envbuilder.threadloop.run_sync`):
        the answer tool when its grade says so and :meth:`answer` runs it."""
        name = self.answer_tool
        return frozenset({name}) if name is not None and self.submit.task_free else frozenset()

    def blocking(self, name: str) -> bool:
        """Whether a call of ``name`` may wait on I/O (it then streams with keep-alives)."""
        declared = self.declared.get(name)
        return declared.tool.blocking if declared is not None else self.submit.blocking

    async def call(
        self, episode: Episode, name: str, tool_input: dict[str, Any]
    ) -> RunToolSuccess | RunToolError:
        """Run one call under the per-call rules; failures are ``RunToolError``s or error outputs."""
        if name == self.answer_tool:
            out = await self.answer(episode, tool_input)
            return call_result(output_of(out))
        declared = self.declared.get(name)
        known = declared is not None and _offered(declared, episode.task)
        if not known and name != self.submit.spec.name:
            return RunToolError(error=f"{name!r} is not a valid tool", reason="not_found")
        if episode.finished:
            return finished_error(name)
        limit = None if self.containers is None else self.time_limit(episode)
        if limit is not None and episode.started is None:
            episode.started = time.time()  # the clock starts with the first call
        if len(episode.transcript) >= MAX_TRANSCRIPT:
            return call_result(_past_bound(episode, name, tool_input))
        if limit is not None and episode.started is not None and time.time() >= episode.started + limit:
            result: RunToolSuccess | RunToolError = RunToolSuccess(
                output=await self._out_of_time(episode, limit)
            )
            tool_input = {}
        elif declared is None:  # the answer tool, within its time limit
            out = await self.answer(episode, tool_input)
            return call_result(output_of(out))
        else:
            result = await self._run(declared, episode, tool_input)
        if isinstance(result, RunToolSuccess):
            _record(episode, name, tool_input, result.output)
        return result

    async def answer(self, episode: Episode, tool_input: dict[str, Any]) -> Reply | ToolOutput | RunToolError:
        """A call of the answer tool under :meth:`call`'s rules (the finished latch, the
        transcript's bound, the record) but the time limit of session containers, which
        :meth:`call` checks first (callers without it: :attr:`answer_tool`): its output itself
        (a graded answer's as a :class:`Reply`), or the input's error (``call`` makes it the
        wire's: :func:`output_of`, ``call_result``)."""
        name = self.submit.spec.name
        if episode.finished:
            return finished_error(name)
        if len(episode.transcript) >= MAX_TRANSCRIPT:
            return _past_bound(episode, name, tool_input)
        out = await self.submit.answer(episode, tool_input)
        if isinstance(out, Reply) or type(out) is ToolOutput:  # (not an input refused)
            field = self.submit.spec.answer_field
            kept = {field: tool_input[field]} if field in tool_input else {}  # ignored keys: not kept
            _record(episode, name, kept, out)
        return out

    async def call_as_user(
        self, episode: Episode, name: str, tool_input: dict[str, Any], round_no: int = 0
    ) -> RunToolSuccess | RunToolError:
        """Run one of the simulated user's own tools as the user (``check`` replays the user's
        gold calls this way); recorded in the transcript with ``by: "user"``."""
        declared = self.user_declared.get(name)
        if declared is None:
            known = ", ".join(sorted(self.user_declared)) or "none"
            return RunToolError(
                error=f"{name!r} is not one of the user's tools ({known})", reason="not_found"
            )
        if episode.finished:
            return finished_error(name)
        if len(episode.transcript) >= MAX_TRANSCRIPT:
            return _error_output(_TRANSCRIPT_FULL)
        result = await self._run(declared, episode, tool_input, user=True)
        if isinstance(result, RunToolSuccess):
            _record(episode, name, tool_input, result.output, by="user", round_no=round_no)
        return result

    async def user_call(
        self, episode: Episode, name: str, tool_input: dict[str, Any], round_no: int, refused: str | None
    ) -> UserCall:
        """One call the simulated user model made (:data:`envbuilder.episode.simulated_user.Act`): run
        (or, with ``refused``, recorded as not run) and in the transcript as the user's, whatever
        happened, so the user model reads its result."""
        if refused is None and name not in self.user_declared:
            refused = f"it is not one of your tools ({', '.join(sorted(self.user_declared))})"
        result = (
            await self.call_as_user(episode, name, tool_input, round_no)
            if refused is None
            else RunToolError(error=f"{name!r} was not run: {refused}")
        )
        if isinstance(result, RunToolError):  # not recorded yet: the user reads why
            _record(
                episode, name, tool_input, _error_output(result.error).output, by="user", round_no=round_no
            )
        entry = episode.transcript[-1]
        return UserCall(entry["id"], name, tool_input, entry["output"], entry["error"], round_no)

    async def _run(
        self, declared: _Declared, episode: Episode, tool_input: dict[str, Any], *, user: bool = False
    ) -> RunToolSuccess | RunToolError:
        config, name = declared.config, declared.tool.name
        try:
            args = declared.model.model_validate(tool_input).model_dump()
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_input=False)
            return RunToolError(error=f"Tool input validation error: {errors}", reason="input_validation")
        used = episode.tool_calls.get(name, 0)
        if config.max_calls is not None and used >= config.max_calls:
            return _error_output(
                f"{name!r} was not run: it may be called at most {config.max_calls} "
                f"time{'s' if config.max_calls != 1 else ''} per episode"
            )
        episode.tool_calls[name] = used + 1
        state = episode.tool_state.setdefault(name, {})
        document = None
        try:
            document = self.state_of(episode) if declared.tool.uses_document else None
            workspace = self._workspace(episode, make=True) if declared.tool.uses_sandbox else None
            call = ToolCall(episode.task, args, state, episode.secrets, document, workspace)
            reply = await declared.tool.run(call)
        except ToolError as exc:
            return _error_output(f"{name!r} failed: {exc}")  # counted, not charged, nothing changed
        except Exception as exc:  # a broken tool (a spec's function): its call fails, not the server
            log.exception("tool %r failed", name)
            return _error_output(f"{name!r} failed: {type(exc).__name__} ({BROKE}; nothing changed)")
        finally:
            if not state:
                episode.tool_state.pop(name, None)
        if document is not None:
            changes = document.commit()
            if len(orjson.dumps(changes)) > MAX_STATE_CHANGES:
                return _error_output(
                    f"{name!r} failed: the episode's changes to its state would pass "
                    f"{MAX_STATE_CHANGES:,} bytes, so nothing was changed"
                )
            episode.state = changes
        episode.cost += config.cost
        finished = (reply.finished or config.terminal) and not user  # only the conversation ends it
        metadata = dict(reply.metadata or {})
        if config.cost:
            metadata["cost"] = config.cost
        reward = None
        if finished:
            episode.finished = True
            reward = self.submit.charge(episode, self.submit.spec.reward_incorrect, metadata)
        blocks = _bounded(reply.blocks, config.max_output_chars)
        return RunToolSuccess(
            output=ToolOutput(blocks=blocks, metadata=metadata or None, reward=reward, finished=finished)
        )

    def _workspace(self, episode: Episode, *, make: bool) -> Workspace | None:
        """The session's container (its name chosen now when ``make`` and it has none)."""
        if self.containers is None:
            return None
        if make and episode.sandbox is None:
            episode.sandbox = new_name()
        limit = self.time_limit(episode)
        started = episode.started
        deadline = started + limit if limit is not None and started is not None else None
        return Workspace(self.containers, episode.sandbox, episode.task, deadline)

    def time_limit(self, episode: Episode) -> float | None:
        """Seconds ``episode`` may run (its task's own ``agent_timeout_sec``, else the
        sandbox's ``time_limit``, within the operator's maximum); None: no limit."""
        if self.containers is None:
            return None
        try:
            return self.containers.limits(episode.task).time_limit
        except SandboxError:
            return None  # a task whose limits are unreadable: its container refuses to start

    async def _out_of_time(self, episode: Episode, limit: float) -> ToolOutput:
        """The end of an episode past its time limit, as Harbor ends an agent that timed out:
        the call is not run, and the work is graded as it stands (an answer of nothing)."""
        output = await self.submit.conclude(episode, "")
        metadata = dict(output.metadata or {}, time_limit=limit)
        reward = output.reward
        if not output.finished:  # attempts were left, but the time is up
            episode.finished = True
            reward = self.submit.charge(episode, metadata.pop("attempt_reward", None), metadata)
        said = "\n".join(b.text for b in output.blocks if isinstance(b, TextBlock))
        text = f"[The episode's time limit of {limit:g} s has passed: your work was graded as it is.] {said}"
        return ToolOutput(blocks=[TextBlock(text=text)], metadata=metadata, reward=reward, finished=True)

    def trajectory(
        self, episode: Episode, message: str | None = None, reply: str | None = None
    ) -> Trajectory:
        """What agent graders read of ``episode``; ``message`` and ``reply`` are the exchange
        being graded (not yet in the transcript)."""
        name, field = self.submit.spec.name, self.submit.spec.answer_field
        calls: list[dict[str, Any]] = []
        said: list[str] = []
        heard: list[str] = []
        for entry in episode.transcript:
            if entry.get("by") == "user" or entry["name"] != name:
                calls.append(
                    {
                        **{k: entry[k] for k in ("name", "input", "output", "error")},
                        "by": entry.get("by", "agent"),
                    }
                )
            elif not entry["error"]:
                said.append(str(entry["input"].get(field, "")))
                heard.append(entry["output"])
        said += [message] if message is not None else []
        heard += [reply] if reply is not None else []
        workspace = self._workspace(episode, make=False)
        if self.document is None:
            return Trajectory(calls, said, heard, workspace=workspace)
        task = episode.task

        async def replay(gold: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
            return await self.replay(task, gold)

        state = episode.state
        if state is None:
            try:
                state = self.document.initial(task)
            except ToolError:
                state = {}
        return Trajectory(calls, said, heard, state, self.document, replay, workspace)

    async def replay(
        self, task: dict[str, Any], calls: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], list[str]]:
        """Run ``calls`` (``{name, arguments}``) with these tools on a fresh episode of ``task``:
        its final state changes, and one line per call that failed, naming it by position and
        tool (``call 2 of 5 (cancel_order): …``)."""
        episode = Episode(task=task)
        errors: list[str] = []
        for i, call in enumerate(calls, 1):
            where = f"call {i} of {len(calls)} ({call['name']})"
            declared = self.declared.get(call["name"])
            by_user = declared is None and call["name"] in self.user_declared
            declared = self.user_declared[call["name"]] if by_user else declared
            if declared is None:
                errors.append(f"{where}: not a tool of this environment")
                continue
            result = await self._run(declared, episode, call["arguments"], user=by_user)
            if isinstance(result, RunToolError):
                errors.append(f"{where}: {result.error}")
            elif result.output.metadata and result.output.metadata.get("error"):
                errors.append(f"{where}: {result.output.metadata['error']}")
        if episode.state is None and self.document is not None:
            episode.state = self.document.initial(task)
        return episode.state or {}, errors

    def state_of(self, episode: Episode) -> World | None:
        """The episode's state document as its tools see it (None without `state:`)."""
        if self.document is None:
            return None
        if episode.state is None:
            episode.state = self.document.initial(episode.task)
        return self.document.state(episode.state)

    async def end_session(self, episode: Episode) -> None:
        """Let each tool release what this session's calls left behind, and remove the
        session's container."""
        if self.containers is not None and episode.sandbox is not None:
            try:
                await self.containers.remove(episode.sandbox)
            except Exception:  # the engine may be gone; the next start reaps it
                log.exception("removing the session container %s failed", episode.sandbox)
        for name, state in list(episode.tool_state.items()):
            declared = self.declared.get(name) or self.user_declared.get(name)
            if declared is None or not state:
                continue
            try:
                await declared.tool.end_session(state)
            except Exception:  # cleanup of one tool must not stop the others'
                log.exception("end_session of tool %r failed", name)

    async def aclose(self) -> None:
        for declared in [*self.declared.values(), *self.user_declared.values()]:
            await declared.tool.aclose()

    def conversation(self, episode: Episode, prompt: list[Message]) -> list[Message]:
        """``prompt`` followed by the episode's calls: each an assistant ``tool_call`` and a user
        ``tool_result`` holding the output (for a dialogue: the next user turn). The simulated
        user's own calls are not the agent's: they are left out."""
        out = list(prompt)
        for entry in episode.transcript:
            if entry.get("by") == "user":
                continue
            call = ToolCallBlock(id=entry["id"], name=entry["name"], input=entry["input"])
            result = ToolResultBlock(
                tool_call_id=entry["id"], blocks=[TextBlock(text=entry["output"])], is_error=entry["error"]
            )
            out.append(Message(role="assistant", blocks=[call]))
            out.append(Message(role="user", blocks=[result]))
        return out


def _offered(declared: _Declared, task: dict[str, Any]) -> bool:
    field = declared.config.only_for
    return field is None or task.get(field) not in (None, "", [], {})


def _past_bound(episode: Episode, name: str, tool_input: dict[str, Any]) -> ToolOutput:
    """A call past the transcript's bound: the episode ends, the call is recorded."""
    episode.finished = True
    out = _error_output(_TRANSCRIPT_FULL, finished=True).output
    _record(episode, name, tool_input, out)
    return out


def _error_output(text: str, *, finished: bool = False) -> RunToolSuccess:
    """A call that failed, as the agent reads it: an output holding the error."""
    return RunToolSuccess(
        output=ToolOutput(
            blocks=[TextBlock(text=f"Error: {text}")], metadata={"error": text}, finished=finished
        )
    )


def _bounded(blocks: list[Any], limit: int) -> list[Any]:
    out, left = [], limit
    for block in blocks:
        if isinstance(block, TextBlock) and len(block.text) > left:
            cut = len(block.text) - left
            out.append(TextBlock(text=f"{block.text[:left]}\n[… {cut:,} more characters cut]"))
            left = 0
        else:
            out.append(block)
            left -= len(block.text) if isinstance(block, TextBlock) else 0
    return out


def _record(
    episode: Episode,
    name: str,
    tool_input: dict[str, Any],
    output: ToolOutput | Reply,
    *,
    by: str | None = None,
    round_no: int = 0,
) -> dict[str, Any]:
    """Add a call to the transcript: its text only, so that an image a tool returns does not
    travel with the session on every store (``/messages`` shows the text of each result). A
    call of the simulated user is marked ``by: "user"``, with the ``round`` of its reply."""
    if isinstance(output, Reply):
        text = output.text
    else:
        blocks = output.blocks
        if len(blocks) == 1 and type(blocks[0]) is TextBlock:  # most outputs: one text, no join
            text = blocks[0].text
        else:
            text = "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
    error = bool(output.metadata and output.metadata.get("error"))
    entry = {
        "id": f"call_{len(episode.transcript) + 1}",
        "name": name,
        "input": tool_input,
        "output": text,
        "error": error,
    }
    if by is not None:
        entry.update(by=by, round=round_no)
    episode.transcript.append(entry)
    return entry
