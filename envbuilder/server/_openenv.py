"""The OpenEnv door: an episode of a served environment through OpenEnv's reset / step / state.

OpenEnv (``openenv-core``) clients speak JSON over a WebSocket at ``{base}/ws``: ``{"type":
"reset", "data": {...}}``, ``{"type": "step", "data": ACTION}``, ``{"type": "state"}`` and
``{"type": "close"}``, answered by ``{"type": "observation", "data": {"observation": {...},
"reward": r, "done": d}}``, ``{"type": "state", "data": {...}}`` or ``{"type": "error", "data":
{"message", "code"}}``. The same operations are offered over HTTP (``POST /reset``, ``POST
/step``, ``GET /state``), where the episode is named by ``episode_id``.

This module holds what both transports share: the wire models, and reset / step / state as
plain functions over the server :class:`~envbuilder.server._context.ServerContext` that go through the
same operations as the ORS routes (``_ops``): an OpenEnv episode is an ORS session in the same
store, owned by the same client, capped and reaped the same way, and graded by the same calls.

The action is OpenEnv's MCP tool action (``CallToolAction`` / ``ListToolsAction``), so
``MCPToolClient`` and ``GenericEnvClient`` both play it::

    {"type": "call_tool", "tool_name": "submit", "arguments": {"answer": "72"}}
    {"type": "list_tools"}

Rewards follow the one convention: each step's reward is the ORS tool output's (null until the
episode ends, then the episode's reward), so the sum of the step rewards, the last non-null one
and the episode's reward are equal; an answer that could not be graded ends the episode with a
null reward (void), never 0.
"""

from __future__ import annotations

import random
import uuid
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from envbuilder._version import __version__
from envbuilder.environment import Environment
from envbuilder.errors import RequestRejected
from envbuilder.protocol import CreateRequest, RunToolError, RunToolOutput, RunToolSuccess
from envbuilder.server import _headers, _ops, _sse, _tool_calls
from envbuilder.server._context import ServerContext
from envbuilder.server._owners import owned
from envbuilder.server._sessions import call_key

PREFIX = "/openenv"
"""Where the door is mounted: OpenEnv clients take ``http://host:port/openenv`` as base URL."""

_STRICT = ConfigDict(extra="forbid")


class ResetRequest(BaseModel):
    """What ``reset`` takes (OpenEnv's ``seed`` and ``episode_id``, and the task to play)."""

    model_config = _STRICT

    seed: int | None = Field(default=None, ge=0, description="Picks the task: its index in the split.")
    episode_id: str | None = Field(
        default=None,
        max_length=_headers.MAX_SID,
        description="The episode's id (its ORS session id); default a new UUID.",
    )
    env_name: str | None = Field(default=None, description="A served environment; default the door's.")
    split: str | None = Field(default=None, description="Default: the train split, else the first one.")
    index: int | None = Field(default=None, description="The task's index in the split (else by seed).")
    task: dict[str, Any] | None = Field(
        default=None, description="A task by value, as ORS ``task_spec`` (its id names a served task)."
    )
    secrets: dict[str, str] | None = Field(default=None, description="Secrets the environment's tools use.")


class CallToolAction(BaseModel):
    """OpenEnv's ``CallToolAction``: run one tool of the episode (the answer tool included)."""

    model_config = _STRICT

    type: Literal["call_tool"] = "call_tool"
    tool_name: str = Field(max_length=256)
    arguments: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ListToolsAction(BaseModel):
    """OpenEnv's ``ListToolsAction``: the episode's tools."""

    model_config = _STRICT

    type: Literal["list_tools"] = "list_tools"
    metadata: dict[str, Any] = Field(default_factory=dict)


Action = Annotated[CallToolAction | ListToolsAction, Field(discriminator="type")]


class ToolErrorInfo(BaseModel):
    """OpenEnv's ``ToolError``: why a call did not run."""

    error_type: Literal["execution_error", "invalid_args", "tool_not_found", "episode_finished"]
    message: str


class EpisodeObservation(BaseModel):
    """The observation of a step (the fields present depend on the step's kind)."""

    episode_id: str | None = None
    env_name: str | None = None
    task_id: Any = None
    split: str | None = None
    index: int | None = None
    messages: list[dict[str, Any]] | None = Field(
        default=None, description="reset: the prompt as chat messages (``role``, text ``content``)."
    )
    prompt_messages: list[dict[str, Any]] | None = Field(
        default=None, description="reset: the prompt as ORS messages (content blocks, images included)."
    )
    tools: list[dict[str, Any]] | None = Field(
        default=None,
        description="reset, list_tools: the tools (``name``, ``description``, ``input_schema``).",
    )
    answer_tool: str | None = Field(default=None, description="reset: the tool that answers the task.")
    tool_name: str | None = None
    result: str | None = Field(default=None, description="call_tool: the tool's output as text.")
    blocks: list[dict[str, Any]] | None = Field(default=None, description="call_tool: the output's blocks.")
    error: ToolErrorInfo | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class EpisodeState(BaseModel):
    """What ``state`` answers."""

    episode_id: str
    step_count: int
    env_name: str
    task_id: Any = None
    done: bool
    attempts: int


_REASONS: dict[str | None, Any] = {
    "not_found": "tool_not_found",
    "name_collision": "tool_not_found",
    "input_validation": "invalid_args",
    "episode_finished": "episode_finished",
    None: "execution_error",
}


RESERVED_TOOL_NAMES = frozenset({"reset", "step", "state", "close"})
"""Tool names OpenEnv keeps for its own controls (openenv-core's ``RESERVED_TOOL_NAMES``: its MCP
environments refuse them, and its harness sessions raise on them)."""


def refuses(envs: list[Environment]) -> list[str]:
    """What OpenEnv cannot express in ``envs``, each naming the environment and the tool."""
    return [
        f"{env.name}: its tool {tool.name!r} has a name OpenEnv keeps for its own controls "
        f"({', '.join(sorted(RESERVED_TOOL_NAMES))}); rename the tool"
        for env in envs
        for tool in env.task_tools_listing.tools
        if tool.name in RESERVED_TOOL_NAMES
    ]


def result(observation: dict[str, Any], reward: float | None = None, done: bool = False) -> dict[str, Any]:
    """OpenEnv's step result: ``{"observation", "reward", "done"}``."""
    return {"observation": observation, "reward": reward, "done": done}


def _default_split(env: Environment) -> str:
    if not env.splits:
        raise RequestRejected(400, f"environment {env.name!r} has no splits to reset to")
    return env.training_split() or next(iter(env.splits))


def _create_request(
    state: ServerContext, env: Environment, request: ResetRequest
) -> tuple[CreateRequest, str, int]:
    """The ORS ``/create`` body of a reset, and the split and index it plays (-1 for a task by value)."""
    if request.task is not None:
        if request.split is not None or request.index is not None or request.seed is not None:
            raise RequestRejected(400, "reset takes a task by value or by split/index/seed, not both")
        return CreateRequest(env_name=env.name, task_spec=request.task, secrets=request.secrets), "", -1
    split = request.split or _default_split(env)
    count = len(_ops.split_of(env, split))
    if count == 0:
        raise RequestRejected(400, f"split {split!r} of {env.name!r} has no tasks")
    if request.index is not None:
        index = request.index
    elif request.seed is not None:
        index = request.seed % count
    else:
        index = random.randrange(count)
    body = CreateRequest(env_name=env.name, split=split, index=index, secrets=request.secrets)
    return body, split, index


def chat_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ORS messages (``role``, ``blocks``) as chat messages with their text as ``content``."""
    return [
        {"role": m["role"], "content": "\n".join(b["text"] for b in m["blocks"] if b.get("type") == "text")}
        for m in messages
    ]


async def reset(
    state: ServerContext, env_name: str | None, request: ResetRequest, x_secrets: str | None = None
) -> tuple[str, dict[str, Any]]:
    """Start an episode (an ORS session in the store); its id and the first observation."""
    env = state.env(request.env_name or env_name or state.default)
    body, split, index = _create_request(state, env, request)
    sid = _headers.require_sid(request.episode_id or str(uuid.uuid4()))
    await _ops.create(state, sid, body, x_secrets)
    try:
        messages = orjson.loads((await _ops.messages(state, sid)).body)
        listing = orjson.loads((await _ops.task_tools(state, sid)).body)
    except BaseException:
        await state.delete(owned(sid))  # a prompt that cannot be rendered leaves no session behind
        raise
    session = await _ops.session_of(state, sid)
    terminal = listing.get("terminal_tool") or {}
    observation = EpisodeObservation(
        episode_id=sid,
        env_name=env.name,
        task_id=session.episode.task.get("id"),
        split=split or None,
        index=index if index >= 0 else None,
        messages=chat_messages(messages),
        prompt_messages=messages,
        tools=listing["tools"],
        answer_tool=terminal.get("name") or (env.submit.spec.name if env.submit is not None else None),
    )
    return sid, result(observation.model_dump(exclude_none=True))


async def step(state: ServerContext, sid: str, action: CallToolAction | ListToolsAction) -> dict[str, Any]:
    """Run one action in the episode ``sid``; OpenEnv's step result."""
    session = await _ops.session_of(state, sid)
    if isinstance(action, ListToolsAction):
        listing = orjson.loads((await _ops.task_tools(state, sid)).body)
        observation = EpisodeObservation(tools=listing["tools"])
        return result(observation.model_dump(exclude_none=True), None, session.episode.finished)
    call = call_key(session.key, uuid.uuid4().hex)
    try:
        frames = await _tool_calls.run_call(state, session, action.tool_name, action.arguments, call)
    except _tool_calls.SessionDeleted:
        raise RequestRejected(410, "Session deleted") from None
    return _step_result(action.tool_name, frames)


def _step_result(name: str, frames: bytes) -> dict[str, Any]:
    """A step's result from the frames of its ORS call."""
    event, payload = _sse.final_event(frames)
    if event == "error":  # a bug in a tool: the episode goes on, the call did not run
        error = ToolErrorInfo(error_type="execution_error", message=payload)
        return result(EpisodeObservation(tool_name=name, error=error).model_dump(exclude_none=True))
    output: RunToolOutput
    parsed = orjson.loads(payload)
    output = (
        RunToolSuccess.model_validate(parsed) if parsed.get("ok") else RunToolError.model_validate(parsed)
    )
    if isinstance(output, RunToolError):
        error = ToolErrorInfo(error_type=_REASONS.get(output.reason, "execution_error"), message=output.error)
        observation = EpisodeObservation(tool_name=name, error=error)
        return result(observation.model_dump(exclude_none=True), None, output.reason == "episode_finished")
    out = output.output
    blocks = [b.model_dump(mode="json", exclude_none=True) for b in out.blocks]
    observation = EpisodeObservation(
        tool_name=name,
        result="\n".join(b["text"] for b in blocks if b.get("type") == "text"),
        blocks=blocks,
        metadata=out.metadata or {},
    )
    return result(observation.model_dump(exclude_none=True), out.reward, out.finished)


async def episode_state(state: ServerContext, sid: str) -> dict[str, Any]:
    """What ``state`` answers for the episode ``sid``."""
    session = await _ops.session_of(state, sid)
    episode = session.episode
    return EpisodeState(
        episode_id=session.sid,
        step_count=sum(1 for entry in episode.transcript if entry.get("by") != "user"),  # the agent's
        env_name=state.envs[session.env].name,
        task_id=episode.task.get("id"),
        done=episode.finished,
        attempts=episode.attempts,
    ).model_dump()


def schema() -> dict[str, Any]:
    """OpenEnv's ``/schema``: the JSON Schemas of the action, the observation and the state."""
    return {
        "action": TypeAdapter(Action).json_schema(),
        "observation": EpisodeObservation.model_json_schema(),
        "state": EpisodeState.model_json_schema(),
    }


def metadata(env: Environment) -> dict[str, Any]:
    """OpenEnv's ``/metadata`` of ``env``."""
    return {
        "name": env.name,
        "description": env.spec.description or env.spec.title or env.name,
        "version": __version__,
        "author": None,
        "documentation_url": None,
        "readme_content": None,
    }


__all__ = [
    "PREFIX",
    "RESERVED_TOOL_NAMES",
    "Action",
    "CallToolAction",
    "ListToolsAction",
    "ResetRequest",
    "episode_state",
    "metadata",
    "refuses",
    "reset",
    "schema",
    "step",
]
