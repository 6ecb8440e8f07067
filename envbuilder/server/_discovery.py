"""Discovery routes: health, environments, tools, splits and tasks (no session needed)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from envbuilder import __version__
from envbuilder.data import SplitView
from envbuilder.environment import Environment
from envbuilder.errors import RequestError, TaskNotFound
from envbuilder.protocol import (
    ListToolsOutput,
    NumTasksResponse,
    Split,
    SplitRequest,
    StatusResponse,
    TaskRangeRequest,
    TaskRequest,
    TaskResponse,
    TasksResponse,
    VersionResponse,
)
from envbuilder.server._app import State, json_response

router = APIRouter()

_HEALTH = b'{"status":"ok"}'


def _state(request: Request) -> State:
    return request.app.state.ors


def _split(env: Environment, name: str) -> SplitView:
    try:
        return env.split(name)
    except TaskNotFound:
        raise RequestError(400, "Invalid split") from None


@router.get("/health", response_model=StatusResponse, tags=["discovery"])
async def health() -> Response:
    """Liveness: ``{"status":"ok"}``."""
    return Response(_HEALTH, media_type="application/json")


@router.get("/version", response_model=VersionResponse, tags=["discovery"])
async def version() -> Response:
    """The envbuilder version serving this environment."""
    return json_response({"version": __version__, "build_sha": None})


@router.get("/list_environments", response_model=list[str], tags=["discovery"])
async def list_environments(request: Request) -> Response:
    """Environment names, the default first."""
    return json_response(list(_state(request).envs))


@router.get("/{env_name}/tools", response_model=ListToolsOutput, tags=["discovery"])
async def list_tools(env_name: str, request: Request) -> Response:
    """The tools every task of the environment offers."""
    return json_response(_state(request).env(env_name).tools_listing)


@router.get("/{env_name}/splits", response_model=list[Split], tags=["discovery"])
async def list_splits(env_name: str, request: Request) -> Response:
    """The splits with their types."""
    env = _state(request).env(env_name)
    return json_response([s.model_dump() for s in env.list_splits()])


@router.post("/{env_name}/num_tasks", response_model=NumTasksResponse, tags=["discovery"])
async def num_tasks(env_name: str, body: SplitRequest, request: Request) -> Response:
    """How many tasks a split has (from metadata: no rows are read)."""
    env = _state(request).env(env_name)
    return json_response({"num_tasks": len(_split(env, body.split))})


@router.post("/{env_name}/task", response_model=TaskResponse, tags=["discovery"])
async def get_task(env_name: str, body: TaskRequest, request: Request) -> Response:
    """One task by index (negative indices count from the end)."""
    env = _state(request).env(env_name)
    split = _split(env, body.split)
    try:
        task = split.task(body.index)
    except TaskNotFound:
        raise RequestError(400, "Invalid index") from None
    return json_response({"task": task, "env_name": env_name})


@router.post("/{env_name}/task_range", response_model=TasksResponse, tags=["discovery"])
async def get_task_range(env_name: str, body: TaskRangeRequest, request: Request) -> Response:
    """Tasks ``start:stop`` with Python slice semantics."""
    env = _state(request).env(env_name)
    split = _split(env, body.split)
    return json_response({"tasks": split.task_range(body.start, body.stop), "env_name": env_name})


@router.post("/{env_name}/tasks", response_model=TasksResponse, tags=["discovery"])
async def list_tasks(env_name: str, body: SplitRequest, request: Request) -> Response:
    """Every task of a split, streamed in batches so other requests are not held up."""
    env = _state(request).env(env_name)
    split = _split(env, body.split)
    tail = b'],"env_name":' + orjson.dumps(env_name) + b"}"

    batches = split.iter_batches()

    def next_chunk() -> bytes | None:
        # Reading and encoding a batch runs in a worker thread so the event loop stays free.
        for batch in batches:
            if batch:
                return orjson.dumps(batch)[1:-1]
        return None

    async def stream() -> AsyncIterator[bytes]:
        yield b'{"tasks":['
        first = True
        while (chunk := await asyncio.to_thread(next_chunk)) is not None:
            yield chunk if first else b"," + chunk
            first = False
        yield tail

    return StreamingResponse(stream(), media_type="application/json")
