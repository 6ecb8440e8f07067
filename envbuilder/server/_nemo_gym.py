"""The NeMo Gym door: the served environment as a NeMo Gym resources server.

Written from NeMo Gym's source (``nemo_gym/base_resources_server.py``,
``responses_api_agents/simple_agent/app.py``, ``nemo_gym/rollout_collection.py``; NeMo Gym
needs Python 3.12, so it is not installed beside envbuilder). Its agents reach a resources
server at the root of its host and port, so the door's routes are at the root:

* ``POST /seed_session`` with a task row: starts the row's episode (an ORS session in the same
  store) and sets the cookie that names it, which the agent sends back on every later call;
* ``POST /{tool}`` with the tool's arguments as JSON: runs one tool of the episode (the answer
  tool included); the answer is the tool's output as text (an error: a 4xx with ``detail``,
  which the agent shows the model, as NeMo Gym does);
* ``POST /verify`` with the row, ``responses_create_params`` and the agent's ``response``: when
  the episode is still running, the text of the response's last assistant message is the
  answer (the answer tool is called with it); the episode's reward is returned as
  ``{..., "reward": r}``. An answer that could not be graded is void: 503 with ``detail`` (a
  failed rollout, which NeMo Gym keeps out of the rewards), never 0;
* ``POST /aggregate_metrics``, ``GET /reverify_mode``, as NeMo Gym's base server.

``GET /nemo_gym/tasks.jsonl?split=…`` streams the task JSONL rollout collection reads: one row
per task, ``responses_create_params`` (the prompt as Responses API ``input``, the tools as
function tools) and the task's place under ``envbuilder`` (no gold).

The door serves one environment (a resources server is one environment), and refuses at
start-up what NeMo Gym cannot express (see :func:`refuses`).
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from envbuilder.environment import Environment
from envbuilder.errors import RequestRejected
from envbuilder.protocol import CreateRequest, RunToolError, RunToolSuccess
from envbuilder.server import _ops, _reply, _sse, _tool_calls
from envbuilder.server._context import ServerContext
from envbuilder.server._owners import owned
from envbuilder.server._sessions import call_key

COOKIE = "envbuilder_nemo_gym"
"""The cookie that names a rollout's episode (its ORS session id)."""
RESULT = "nemo-gym:result"
"""Where an episode that finished in a tool call keeps that call's result until ``/verify``
(in ``Episode.tool_state``, so it lives in the session store; no tool can take this name)."""
ROW_KEY = "envbuilder"
"""The field of a task row that places it (environment, split, index, id)."""

NEMO_GYM_ROUTES = frozenset({"seed_session", "verify", "aggregate_metrics", "reverify_mode", "mcp"})
"""Root routes of a NeMo Gym resources server (its tools are beside them)."""


def refuses(envs: list[Environment], taken: frozenset[str]) -> list[str]:
    """What NeMo Gym cannot express in ``envs``, each naming the feature (empty: it can serve them).

    Args:
        taken: the server's other root paths (the ORS routes), which a tool's route cannot take.
    """
    if len(envs) != 1:
        names = ", ".join(env.name for env in envs)
        return [
            f"{len(envs)} environments are served ({names}): a NeMo Gym resources server is one "
            "environment at the root of its host and port; serve each on its own server"
        ]
    env = envs[0]
    problems = []
    for tool in env.tools_listing.tools:
        if tool.name in NEMO_GYM_ROUTES or tool.name in taken:
            problems.append(
                f"{env.name}: its tool {tool.name!r} would take the route /{tool.name}, which is "
                "the resources server's own (NeMo Gym calls a tool at /{name})"
            )
    if env.submit is None:
        problems.append(f"{env.name}: it has no answer tool, and NeMo Gym's /verify grades an answer")
    return problems


# -- task rows ------------------------------------------------------------------------------------


def function_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """An ORS tool spec as a Responses API function tool."""
    schema = tool.get("input_schema") or {"type": "object", "properties": {}}
    return {
        "type": "function",
        "name": tool["name"],
        "description": tool.get("description", ""),
        "parameters": schema,
        "strict": False,
    }


def responses_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ORS messages as Responses API ``input`` messages (text as a string; with images, parts)."""
    out = []
    for message in messages:
        blocks = [b for b in message["blocks"] if b.get("type") in ("text", "image")]
        if all(b["type"] == "text" for b in blocks):
            content: Any = "\n".join(b["text"] for b in blocks)
        else:
            kind = "output_text" if message["role"] == "assistant" else "input_text"
            content = [
                {"type": kind, "text": b["text"]}
                if b["type"] == "text"
                else {"type": "input_image", "image_url": f"data:{b['mimeType']};base64,{b['data']}"}
                for b in blocks
            ]
        out.append({"type": "message", "role": message["role"], "content": content})
    return out


def task_row(env: Environment, split: str, index: int, agent: str | None) -> bytes:
    """One line of the task JSONL (with its newline): the prompt and tools of task ``index``."""
    task = env.split(split).task(index)
    messages = [m.model_dump(mode="json", exclude_none=True) for m in env.messages(task)]
    tools = [t.model_dump(mode="json") for t in env.task_tools(task).tools]
    row: dict[str, Any] = {
        "responses_create_params": {
            "input": responses_input(messages),
            "tools": [function_tool(t) for t in tools],
        },
        ROW_KEY: {"env_name": env.name, "split": split, "index": index, "task_id": task.get("id")},
    }
    if agent:
        row["agent_ref"] = {"type": "responses_api_agents", "name": agent}
    return orjson.dumps(row) + b"\n"


# -- an episode -----------------------------------------------------------------------------------


def _place(state: ServerContext, row: dict[str, Any]) -> tuple[Environment, str, int]:
    """The environment, split and index a task row names (``envbuilder`` field)."""
    place = row.get(ROW_KEY)
    if not isinstance(place, dict):
        raise RequestRejected(
            422,
            f"the row has no {ROW_KEY!r} field naming its task: send the rows /nemo_gym/tasks.jsonl gives",
        )
    env = state.envs[state.default]
    named = place.get("env_name")
    if isinstance(named, str) and named.lower() != state.default:
        raise RequestRejected(404, state.unknown(named))
    split, index = place.get("split"), place.get("index")
    if not isinstance(split, str) or not isinstance(index, int) or isinstance(index, bool):
        raise RequestRejected(
            422, f"{ROW_KEY}.split (a string) and {ROW_KEY}.index (an integer) are required"
        )
    return env, split, index


async def seed(state: ServerContext, row: dict[str, Any]) -> str:
    """Start the episode of a task row; its session id (the cookie's value)."""
    env, split, index = _place(state, row)
    sid = str(uuid.uuid4())
    await _ops.create(state, sid, CreateRequest(env_name=env.name, split=split, index=index), None)
    return sid


async def call(state: ServerContext, sid: str, name: str, arguments: Any) -> tuple[int, bytes, bytes]:
    """Run tool ``name`` in episode ``sid``: the status, body and media type of the answer."""
    if not isinstance(arguments, dict):
        raise RequestRejected(
            422, f"a tool's body is a JSON object of its arguments, not {type(arguments).__name__}"
        )
    session = await _ops.session_of(state, sid)
    frames = await _run(state, session, name, arguments)
    output = _output(frames)
    if isinstance(output, RunToolError):
        status = {"not_found": 404, "input_validation": 422, "episode_finished": 409}.get(
            output.reason or "", 500
        )
        return status, orjson.dumps({"detail": output.error}), _reply.JSON
    if output.output.finished:
        await _remember(state, session.key, frames)
    text = "\n".join(b.text for b in output.output.blocks if b.type == "text")
    return 200, text.encode(), b"text/plain; charset=utf-8"


async def _run(state: ServerContext, session: Any, name: str, arguments: dict[str, Any]) -> bytes:
    try:
        return await _tool_calls.run_call(
            state, session, name, arguments, call_key(session.key, uuid.uuid4().hex)
        )
    except _tool_calls.SessionDeleted:
        raise RequestRejected(410, "Session deleted") from None


def _output(frames: bytes) -> RunToolSuccess | RunToolError:
    event, payload = _sse.final_event(frames)
    if event == "error":  # a bug in a tool
        return RunToolError(error=payload)
    parsed = orjson.loads(payload)
    return RunToolSuccess.model_validate(parsed) if parsed.get("ok") else RunToolError.model_validate(parsed)


async def _remember(state: ServerContext, key: str, frames: bytes) -> None:
    """Keep the result of the call that finished the episode in the session, for ``/verify``."""
    store = state.sessions
    for _ in range(_tool_calls.SAVE_TRIES):
        current = await store.get(key)
        if current is None:
            raise RequestRejected(410, "Session deleted")
        current.episode.tool_state[RESULT] = {"frames": frames.decode()}
        if await store.save(current, call_key(key, uuid.uuid4().hex), frames, None):
            return
    raise RequestRejected(503, "too many concurrent calls on this session", headers={"Retry-After": "1"})


def final_text(response: Any) -> str:
    """The text of the last assistant message of a Responses API ``response``."""
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        raise RequestRejected(422, "response.output (the agent's Responses API output items) is required")
    text = ""
    for item in response["output"]:
        if (
            isinstance(item, dict)
            and item.get("type") == "message"
            and item.get("role", "assistant") == "assistant"
        ):
            parts = item.get("content")
            if isinstance(parts, str):
                text = parts
            elif isinstance(parts, list):
                text = "".join(
                    p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "output_text"
                )
    return text


async def verify(state: ServerContext, sid: str | None, body: dict[str, Any]) -> bytes:
    """The verify response: ``body`` with the episode's ``reward``. The episode is deleted."""
    if not isinstance(body.get("responses_create_params"), dict):
        raise RequestRejected(422, "responses_create_params (an object) is required")
    answer = final_text(body.get("response"))
    if sid is None:  # an agent that did not seed the session: the row names the task
        sid = await seed(state, body)
    try:
        reward = await _reward(state, sid, answer)
    finally:
        await state.delete(owned(sid))
    return orjson.dumps({**body, "reward": reward})


async def _reward(state: ServerContext, sid: str, answer: str) -> float:
    session = await _ops.session_of(state, sid)
    env = state.envs[session.env]
    kept = session.episode.tool_state.get(RESULT)
    if kept is not None:
        output = _output(kept["frames"].encode())
    elif session.episode.finished:
        raise RequestRejected(409, "this episode has already been verified")
    else:
        assert env.submit is not None  # refused at start-up otherwise
        spec = env.submit.spec
        output = _output(await _run(state, session, spec.name, {spec.answer_field: answer}))
    if isinstance(output, RunToolError):
        raise RequestRejected(422, f"the answer was not taken: {output.error}")
    if not output.output.finished:
        return 0.0  # the agent stopped before the episode ended (a dialogue it left): its own doing
    if output.output.reward is None:
        raise RequestRejected(
            503,
            "the answer could not be graded: the rollout is void (its reward is null, never 0); "
            "retry it or leave it out",
            headers={"Retry-After": "1"},
        )
    return output.output.reward


def aggregate(body: Any) -> dict[str, Any]:
    """``/aggregate_metrics``: the mean reward over the verify responses, overall and per task."""
    responses = body.get("verify_responses") if isinstance(body, dict) else None
    if not isinstance(responses, list):
        raise RequestRejected(422, "verify_responses (a list) is required")
    rewards = [
        r["reward"] for r in responses if isinstance(r, dict) and isinstance(r.get("reward"), int | float)
    ]
    by_task: dict[Any, list[float]] = {}
    for r in responses:
        if isinstance(r, dict) and isinstance(r.get("reward"), int | float):
            by_task.setdefault(r.get("_ng_task_index"), []).append(r["reward"])
    mean = sum(rewards) / len(rewards) if rewards else None
    metrics = {"mean/reward": mean, "rollouts": len(rewards)}
    groups = [
        {"_ng_task_index": task, "mean/reward": sum(v) / len(v), "rollouts": len(v)}
        for task, v in by_task.items()
    ]
    return {"group_level_metrics": groups, "agent_metrics": metrics, "key_metrics": {"mean/reward": mean}}


__all__ = ["COOKIE", "aggregate", "call", "refuses", "seed", "task_row", "verify"]
