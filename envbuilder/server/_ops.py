"""What each ORS route does, as plain functions over the :class:`ServerContext`: discovery,
sessions and an episode's prompt and tools (tool calls: ``_tool_calls``).

Both doors call these through the one route table (``_routes``). Each returns a
:class:`Reply` of pre-encoded bytes or raises :class:`RequestRejected`.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson

from envbuilder import deadlines
from envbuilder._version import __version__
from envbuilder.data import SplitView, Task
from envbuilder.environment import Environment
from envbuilder.episode import Episode
from envbuilder.errors import DataError, EnvbuilderError, RequestRejected, TaskNotFound
from envbuilder.protocol import CreateRequest
from envbuilder.server import _sse
from envbuilder.server._context import ServerContext, ServerSettings, log
from envbuilder.server._headers import parse_secrets
from envbuilder.server._owners import client_name, owned
from envbuilder.server._reply import HEALTH, JSON, OK, SSE, Reply, json_reply, models_reply
from envbuilder.server._returned import served_row
from envbuilder.server._sessions import SessionRecord

# -- discovery ------------------------------------------------------------------------------------


def version() -> Reply:
    return json_reply({"version": __version__, "build_sha": None})


def list_environments(ctx: ServerContext) -> Reply:
    """Environment names, the default first."""
    return json_reply(list(ctx.envs))


def list_tools(ctx: ServerContext, env_name: str) -> Reply:
    return Reply(ctx.tools_json[ctx.env(env_name).name.lower()])


def list_splits(ctx: ServerContext, env_name: str) -> Reply:
    return Reply(ctx.splits_json[ctx.env(env_name).name.lower()])


async def health(ctx: ServerContext) -> Reply:
    """Liveness; with a shared store, whether it answers and takes writes (503 with
    Retry-After and what is wrong while it does not); where a checker that evaluates answers is
    served, whether it runs confined (``"confinement": "bubblewrap"`` or ``"off"``)."""
    if ctx.sessions.shared and not await ctx.sessions.healthy():
        problem = getattr(ctx.sessions, "problem", None) or "down"
        body = orjson.dumps({"status": "unavailable", "store": problem})
        return Reply(body, JSON, 503, headers={"retry-after": "1"})
    containers = {n: e.containers.report() for n, e in ctx.envs.items() if e.containers is not None}
    if containers:  # session containers: their start-up and idle costs (changes with each call)
        body_: dict[str, Any] = {"status": "ok", "containers": containers}
        if ctx.keeper is not None:
            body_["container_pool"] = ctx.keeper.report()
        if ctx.confinement is not None:
            body_["confinement"] = ctx.confinement.word
        return Reply(orjson.dumps(body_))
    return HEALTH if ctx.confinement is None else _health_with(ctx.confinement.word)


@functools.cache
def _health_with(confinement: str) -> Reply:
    return Reply(orjson.dumps({"status": "ok", "confinement": confinement}))


# -- discovery ------------------------------------------------------------------------------------


def split_of(env: Environment, name: str) -> SplitView:
    try:
        return env.split(name)
    except TaskNotFound:
        raise RequestRejected(400, "Invalid split") from None


def num_tasks(ctx: ServerContext, env_name: str, split: str) -> Reply:
    return Reply(b'{"num_tasks":%d}' % len(split_of(ctx.env(env_name), split)))


def get_task(ctx: ServerContext, env_name: str, split: str, index: int) -> Reply:
    env = ctx.env(env_name)
    view = split_of(env, split)
    try:
        task = view.task(index)
    except TaskNotFound:
        raise RequestRejected(400, "Invalid index") from None
    if env.private_fields:
        ctx.served.record(env.name, task.get("id"), split, index % len(view))
        task = env.public(task)
    return Reply(orjson.dumps({"task": task, "env_name": env_name}))


TASK_PAGE = 1000
"""Ranges up to this many tasks are answered in one piece; longer ones are streamed in batches."""


def task_range_span(
    ctx: ServerContext, env_name: str, split: str, start: int | None, stop: int | None
) -> range:
    """The indices ``start:stop`` selects (Python slice semantics); 400 saying how to page when
    there are more than the server lists at once."""
    view = split_of(ctx.env(env_name), split)
    span = range(len(view))[start:stop]
    cap = ctx.settings.max_task_range
    if len(span) > cap:
        raise RequestRejected(
            400,
            f"task_range lists at most {cap:,} tasks at once and this range has {len(span):,}: "
            f'page with start and stop ({{"start": {span.start}, "stop": {span.start + cap}}}, then '
            f'{{"start": {span.start + cap}, "stop": {span.start + 2 * cap}}}, ...), or stream /tasks',
        )
    return span


def get_task_range(
    ctx: ServerContext, env_name: str, split: str, start: int | None, stop: int | None
) -> Reply:
    """Tasks ``start:stop``: up to :data:`TASK_PAGE` whole, longer ranges streamed
    (:func:`stream_tasks`), so listing a 100,000-task split holds one batch in memory."""
    span = task_range_span(ctx, env_name, split, start, stop)
    if len(span) > TASK_PAGE:
        return Reply(b"", chunks=stream_tasks(ctx, env_name, split, span))
    env = ctx.env(env_name)
    tasks = _public_page(ctx, env, split, span.start, span.stop)
    return Reply(orjson.dumps({"tasks": tasks, "env_name": env_name}))


def list_tasks(ctx: ServerContext, env_name: str, split: str) -> Reply:
    """Every task of a split, streamed in batches (:func:`stream_tasks`)."""
    span = range(len(split_of(ctx.env(env_name), split)))
    return Reply(b"", chunks=stream_tasks(ctx, env_name, split, span))


def _public_page(ctx: ServerContext, env: Environment, split: str, start: int, stop: int) -> list[Task]:
    """Tasks ``start:stop`` of a split as clients see them: private fields left out, and each
    served id recorded so a task sent back to ``/create`` is found by it."""
    tasks = split_of(env, split).task_range(start, stop)
    if env.private_fields:
        for i, task in enumerate(tasks):
            ctx.served.record(env.name, task.get("id"), split, start + i)
        tasks = [env.public(t) for t in tasks]
    return tasks


async def stream_tasks(ctx: ServerContext, env_name: str, split: str, span: range) -> AsyncIterator[bytes]:
    """``{"tasks":[...],"env_name":...}`` for the tasks of ``span``, produced batch by batch:
    memory stays bounded by a batch whatever the split's size, and reading and encoding run in
    a worker thread so the event loop stays free."""
    env = ctx.env(env_name)
    batches = iter(range(span.start, span.stop, TASK_PAGE))

    def next_chunk() -> bytes | None:
        for lo in batches:
            tasks = _public_page(ctx, env, split, lo, min(span.stop, lo + TASK_PAGE))
            if tasks:
                return orjson.dumps(tasks)[1:-1]
        return None

    yield b'{"tasks":['
    first = True
    while (chunk := await asyncio.to_thread(next_chunk)) is not None:
        yield chunk if first else b"," + chunk
        first = False
    yield b'],"env_name":' + orjson.dumps(env_name) + b"}"


# -- sessions -------------------------------------------------------------------------------------


def create_session() -> Reply:
    return Reply(_sse.event("task_id", str(uuid.uuid4())) + _sse.event("end", ""), SSE)


async def session_of(ctx: ServerContext, sid: str) -> SessionRecord:
    """The running request's client's session ``sid`` (its timeout renewed); 404 when unknown,
    which is what another client's session is (:func:`owned`)."""
    session = await ctx.sessions.get(owned(sid))
    if session is None:
        raise RequestRejected(404, NO_SESSION)
    return session


NO_SESSION = "Active environment not found"
"""The answer to a session this client does not have (none by that id, or another's)."""


async def create(
    ctx: ServerContext, sid: str, body: CreateRequest, x_secrets: str | None, x_deployment: str | None = None
) -> Reply:
    """Start a session. Its environment: the body's ``env_name``, else the one ``X-Deployment``
    names (how the openreward client names it), else the default environment.

    The checks run in the reference servers' order (docs/protocol.md §5.1): a sid already in
    use is refused before the environment, the task and the secrets are looked at. The sid is
    taken only by the store's atomic ``add``, once everything else passed; a request that fails
    a later check looks the sid up before answering, so it answers ``Session already exists``
    for a sid in use at that moment and never leaves the sid taken."""
    try:
        env, task, secrets = await _resolve(ctx, body, x_secrets, x_deployment)
    except RequestRejected:
        if await ctx.sessions.get(owned(sid)) is not None:
            raise RequestRejected(400, SESSION_EXISTS) from None
        raise
    client = client_name()
    episode = Episode(task=task, secrets=secrets)
    session = SessionRecord(
        sid=sid, env=env.name.lower(), episode=episode, client=client
    )  # stored under its creator's name (SessionRecord.key): another client's id never clashes
    keeper = ctx.keeper if env.containers is not None else None
    if keeper is None:
        if not await ctx.sessions.add(session, ctx.caps):
            raise RequestRejected(400, SESSION_EXISTS)
        return Reply(orjson.dumps({"sid": sid}))
    # A place for its container first (503 when the pool stays full), bound to the session
    # before the session exists, so that no container is ever made that a reaper cannot place.
    episode.sandbox = await keeper.admit(env, client, task)
    added = False
    try:
        await keeper.bind(episode.sandbox, session.key)
        added = await ctx.sessions.add(session, ctx.caps)
    finally:
        if not added:
            keeper.forget(env, episode.sandbox)
    if not added:
        raise RequestRejected(400, SESSION_EXISTS)
    return Reply(orjson.dumps({"sid": sid}))


SESSION_EXISTS = "Session already exists"


async def _resolve(
    ctx: ServerContext, body: CreateRequest, x_secrets: str | None, x_deployment: str | None
) -> tuple[Environment, Task, dict[str, str]]:
    """A ``/create``'s environment, task and secrets, in the reference servers' order: the
    environment (404), the toolset, the task (400; 403 for a task this server does not take),
    then the secrets."""
    settings = ctx.settings
    if body.env_name:
        env = ctx.env(body.env_name)
    else:
        env = ctx.envs[(ctx.deployment(x_deployment) if x_deployment else None) or ctx.default]
    if body.toolset_name is not None:
        raise RequestRejected(400, f"unknown toolset {body.toolset_name!r}; this environment has no toolsets")
    if body.task_spec is not None:
        if not settings.accept_task_spec:
            raise RequestRejected(403, "this server takes tasks only by split and index, not task_spec")
        if len(orjson.dumps(body.task_spec)) > settings.max_task_spec_bytes:
            limit = settings.max_task_spec_bytes
            raise RequestRejected(413, f"task_spec is larger than {limit:,} bytes of JSON")
        task = await served_row(env, body.task_spec, ctx.served.find(env.name, body.task_spec.get("id")))
        if task is None:
            task = _client_task(settings, body.task_spec)
        try:
            env.check_task(task)
        except DataError as exc:
            raise RequestRejected(400, str(exc)) from None
    else:
        assert body.split is not None and body.index is not None
        try:
            task = split_of(env, body.split).task(body.index)
        except TaskNotFound:
            raise RequestRejected(400, "Invalid index") from None
    return env, task, parse_secrets(x_secrets, body.secrets)


CLIENT_ID_PREFIX = "client:"
"""Prefix of the id of a task a client wrote, so it never takes a served task's id."""


def is_client_task(task: Task) -> bool:
    """Whether ``task`` is one a client wrote (``--client-tasks``): its id is marked, or it has
    none (every served row has one)."""
    task_id = task.get("id")
    return task_id is None or str(task_id).startswith(CLIENT_ID_PREFIX)


def _client_task(settings: ServerSettings, task: Any) -> Any:
    """A task the client wrote, when the server takes those (``--client-tasks``), its id
    marked as the client's; else 403."""
    if not settings.client_tasks:
        raise RequestRejected(
            403,
            "task_spec names no task this environment serves (send a task as /task or /tasks "
            "returns it, id included); tasks a client writes are graded only on a server "
            "started with --client-tasks",
        )
    task_id = task.get("id")
    if task_id is not None and not str(task_id).startswith(CLIENT_ID_PREFIX):
        task = {**task, "id": f"{CLIENT_ID_PREFIX}{task_id}"}
    return task


async def ping(ctx: ServerContext, sid: str) -> Reply:
    await session_of(ctx, sid)
    return OK


async def delete(ctx: ServerContext, sid: str) -> Reply:
    """Delete the client's session ``sid``; idempotent (PROTOCOL.md E13), so another client's
    session gets what an unknown one gets: 200, and it is not deleted."""
    await ctx.delete(owned(sid))
    return Reply(orjson.dumps({"sid": sid}))


def delete_session(sid: str) -> Reply:
    return Reply(orjson.dumps({"sid": sid}))


# -- an episode -----------------------------------------------------------------------------------


async def _render(env: Environment, fn: Any, arg: Any, task: Task) -> Any:
    """Render on the loop when it takes bounded time, else on a worker thread (under the
    template's deadline), so a slow template never holds the other requests.

    A render that fails (past its budget, refused by the sandbox, or the task's data does not
    fit the template) is never a 500, which is kept for the server's own bugs:

    * on a served task it is the environment's failure, not the request's: 503 with
      Retry-After (a render past its time budget may pass on a less loaded server; both
      reference clients retry a 503, then give up with this detail). It is the ``/prompt``
      counterpart of a grade that cannot be computed, which is void, never 0;
    * on a task the client wrote (``--client-tasks``) its data is the client's: 422."""
    try:
        return fn(arg) if env.inline_prompt else await deadlines.offload(fn, arg)
    except EnvbuilderError as exc:  # a template or the task's data cannot be rendered
        if is_client_task(task):
            raise RequestRejected(
                422, f"the task_spec this session was created with cannot be rendered: {exc}"
            ) from None
        log.warning(
            "environment %s cannot render the prompt of task %r: %s", env.name, task.get("id"), exc.message
        )
        raise RequestRejected(
            503,
            f"the environment cannot render this task's prompt: {exc}. Its spec is at fault, not the "
            "request: retry later, or skip the task",
            headers={"Retry-After": RENDER_RETRY_AFTER},
        ) from None


RENDER_RETRY_AFTER = "5"
"""Seconds a client is asked to wait before asking again for a prompt that could not be rendered."""


async def prompt(ctx: ServerContext, sid: str) -> Reply:
    session = await session_of(ctx, sid)
    env = ctx.envs[session.env]
    return models_reply(await _render(env, env.prompt, session.episode.task, session.episode.task))


async def messages(ctx: ServerContext, sid: str) -> Reply:
    """The conversation so far: the prompt, then each tool call and its result."""
    session = await session_of(ctx, sid)
    env = ctx.envs[session.env]
    return models_reply(await _render(env, env.conversation, session.episode, session.episode.task))


async def task_tools(ctx: ServerContext, sid: str) -> Reply:
    session = await session_of(ctx, sid)
    env = ctx.envs[session.env]
    if env.toolbox.varies:  # some tools exist only for some tasks (`only_for`)
        return json_reply(env.task_tools(session.episode.task))
    return Reply(ctx.task_tools_json[session.env])


async def score_group(ctx: ServerContext, sid: str) -> Reply:
    session = await session_of(ctx, sid)
    raise RequestRejected(404, f"Environment {session.env!r} does not implement score_group")
