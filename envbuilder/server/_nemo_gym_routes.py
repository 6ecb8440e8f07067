"""The NeMo Gym door's routes (see ``_nemo_gym``): NeMo Gym's resources-server routes and one
route per tool at the root, and the task JSONL under ``/nemo_gym``. Every request passes the
server's front door (API key, bounded body, one JSON error shape)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse

from envbuilder.environment import Environment
from envbuilder.errors import EnvbuilderError, RequestRejected
from envbuilder.server import _headers, _nemo_gym, _ops, _reply
from envbuilder.server._context import ServerContext
from envbuilder.server._routes import errors

log = logging.getLogger("envbuilder.server")

ROWS_BATCH = 64
"""Task rows rendered at once, off the event loop, while the JSONL streams."""


def _state(request: Request) -> ServerContext:
    return request.app.state.context


async def _body(request: Request) -> Any:
    try:
        return orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        raise RequestRejected(422, "the body is not JSON") from None


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestRejected(422, "the body is a JSON object")
    return value


def _sid(request: Request, required: bool = True) -> str | None:
    value = request.cookies.get(_nemo_gym.COOKIE)
    if value is None:
        if required:
            raise RequestRejected(
                400,
                f"no episode: POST the task's row to /seed_session first (its {_nemo_gym.COOKIE} "
                "cookie names it)",
            )
        return None
    return _headers.require_sid(value)


def build_router(env: Environment) -> APIRouter:
    """The door's routes for ``env`` (one per tool, so every path is fixed)."""
    router = APIRouter(tags=["nemo_gym"])

    @router.get("/nemo_gym/tasks.jsonl", responses=errors(400, 401), summary="The task JSONL of a split")
    async def tasks(
        request: Request,
        split: Annotated[str | None, Query(description="Default: the first split.")] = None,
        start: Annotated[int | None, Query()] = None,
        stop: Annotated[int | None, Query()] = None,
        agent: Annotated[str | None, Query(description="The agent_ref name each row names.")] = None,
    ) -> Response:
        """One JSON line per task: ``responses_create_params`` and the task's place (no gold)."""
        name = split or env.list_splits()[0].name
        span = range(len(_ops.split_of(env, name)))[start:stop]
        return StreamingResponse(_rows(env, name, span, agent), media_type="application/jsonl")

    @router.post("/seed_session", responses=errors(401, 404, 413), summary="Start a task row's episode")
    async def seed_session(request: Request) -> Response:
        sid = await _nemo_gym.seed(_state(request), _object(await _body(request)))
        response = Response(b"{}", media_type="application/json")
        response.set_cookie(_nemo_gym.COOKIE, sid, httponly=True, samesite="strict")
        return response

    @router.post("/verify", responses=errors(400, 401, 404, 413), summary="The episode's reward")
    async def verify(request: Request) -> Response:
        state = _state(request)
        body = await _nemo_gym.verify(state, _sid(request, required=False), _object(await _body(request)))
        return Response(body, media_type="application/json")

    @router.post("/aggregate_metrics", responses=errors(401, 413), summary="Mean rewards")
    async def aggregate_metrics(request: Request) -> Response:
        return Response(
            orjson.dumps(_nemo_gym.aggregate(await _body(request))), media_type="application/json"
        )

    @router.get("/reverify_mode", summary="Whether /verify may be called again on a rollout")
    async def reverify_mode() -> Response:
        return Response(b'"unsupported"', media_type="application/json")  # verify ends the episode

    for tool in env.tools_listing.tools:
        router.add_api_route(
            f"/{tool.name}",
            _tool_route(tool.name),
            methods=["POST"],
            responses=errors(400, 401, 404, 410, 413),
            summary=f"Run the tool {tool.name}",
            description=tool.description,
            name=f"nemo_gym_tool_{tool.name}",
        )
    return router


def _tool_route(name: str) -> Any:
    async def run(request: Request) -> Response:
        state = _state(request)
        sid = _sid(request)
        assert sid is not None
        headers: dict[str, str] = {}
        try:
            status, body, media = await _nemo_gym.call(state, sid, name, await _body(request))
        except RequestRejected as exc:
            status, body, media = exc.status, orjson.dumps({"detail": exc.message}), _reply.JSON
            headers = dict(exc.headers or {})
        response = Response(body, status, headers=headers, media_type=media.decode())
        # NeMo Gym's agent sends the next call only the cookies this answer sets (as Starlette's
        # session middleware sets its cookie on every answer): set it again, errors included.
        response.set_cookie(_nemo_gym.COOKIE, sid, httponly=True, samesite="strict")
        return response

    return run


async def _rows(env: Environment, split: str, span: range, agent: str | None) -> AsyncIterator[bytes]:
    """The rows of ``span``, rendered batch by batch in a worker thread. A task whose prompt
    cannot be rendered is left out and logged (``envbuilder check`` names it)."""

    def batch(indices: range) -> bytes:
        out = []
        for index in indices:
            try:
                out.append(_nemo_gym.task_row(env, split, index, agent))
            except EnvbuilderError as exc:
                log.warning("%s %s[%d] left out of the task JSONL: %s", env.name, split, index, exc.message)
        return b"".join(out)

    for lo in range(span.start, span.stop, ROWS_BATCH):
        yield await asyncio.to_thread(batch, span[lo - span.start : lo - span.start + ROWS_BATCH])


__all__ = ["build_router"]
