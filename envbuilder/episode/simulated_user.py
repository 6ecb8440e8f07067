"""A simulated user: an OpenAI-compatible model plays the user of a task, turn by turn.

The agent's text never reaches an ORS server, so the conversation goes through the answer tool
(``send_message``): each call's input is the agent's message and its output the user's reply.
The episode keeps only its transcript (the calls), from which the conversation is rebuilt for
every turn, so a session stays small and any worker can serve the next turn.

The user model sees its instructions (the spec's ``user.template`` over the task) as the system
message, and the dialogue with the roles swapped (the agent's messages as ``user``, its own as
``assistant``). Its calls follow the shared retry policy (:mod:`envbuilder.retry`); a reply that
is not a turn (empty) is asked again and never cached, and valid replies are cached like a
judge's, keyed by the whole request (so a changed template, model or sampling setting, or a
changed conversation, is never answered with an old reply).

Dual control: a user with its own tools (``user.tools``) is offered them in the same chat wire
format; a reply with tool calls has them run (by the toolbox, on the episode's state, recorded
as the user's) and their results fed back, for at most ``max_tool_rounds`` rounds, until the
user answers in text. The earlier rounds are part of the conversation rebuilt for every turn.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envbuilder import deadlines
from envbuilder.data import Task
from envbuilder.errors import EnvbuilderError
from envbuilder.llm import (
    ChatModel,
    ModelError,
    ReplyCache,
    Sampling,
    Usage,
    cache_key,
    chat_body,
    open_cache,
    reply_text,
    resolve_api_key,
)
from envbuilder.retry import RetryPolicy
from envbuilder.spec import UserSpec
from envbuilder.templating import template_or_file

__all__ = ["Act", "Exchange", "SimulatedUser", "UserCall", "UserTurn", "UserUnavailable"]

MAX_CALLS_PER_ROUND = 8
"""Tool calls one reply of the user may make; the rest are answered with an error, not run."""
CACHE_VERSION = 2
"""Part of every cache key: replies cached under an older key shape are never replayed."""


class UserUnavailable(EnvbuilderError):
    """The user model could not give a turn (unreachable, refused, or only invalid replies)."""

    code = "user_unavailable"


@dataclass(frozen=True)
class UserTurn:
    """The user's reply to one agent message."""

    text: str
    """What the agent reads (the stop marker removed)."""
    stopped: bool
    """The user ended the conversation (the reply held the stop marker)."""
    cached: bool = False
    calls: tuple[UserCall, ...] = ()
    """The user's tool calls before this reply, in order."""


@dataclass(frozen=True)
class UserCall:
    """One call the user made with its own tools, as run."""

    id: str
    name: str
    input: dict[str, Any]
    output: str
    error: bool
    round: int
    """The reply (0-based, within one turn) whose tool calls it was one of."""


@dataclass(frozen=True)
class Exchange:
    """An earlier turn: the agent's message, the user's tool calls, the user's reply."""

    said: str
    heard: str
    calls: tuple[UserCall, ...] = field(default=())


Act = Callable[[str, dict[str, Any], int, str | None], Awaitable[UserCall]]
"""Runs one of the user's tool calls on the episode and records it: ``(name, arguments, round,
refused)``; a call with ``refused`` set is recorded as failed with that text, not run."""


def _function(spec: Any) -> dict[str, Any]:
    """A tool spec (``name``, ``description``, ``input_schema``) as a chat-completions tool."""
    parameters = spec.input_schema or {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": spec.name, "description": spec.description or "", "parameters": parameters},
    }


class SimulatedUser:
    """The ``user:`` of a spec."""

    def __init__(self, spec: UserSpec, base_dir: Path | None):
        self.spec = spec
        template = template_or_file(spec.template, spec.template_file, key="user.template", base_dir=base_dir)
        assert template is not None  # the spec requires one of them
        self._template = template
        self._cache: ReplyCache | None = open_cache() if spec.cache else None
        self._retry = RetryPolicy(max_retries=spec.max_retries, backoff=spec.backoff, repeat_safe=True)
        self.usage = Usage()
        """The user model's requests (retries included) and tokens, every turn's together."""
        self.tools: list[dict[str, Any]] = []
        """The user's own tools in the chat-completions shape (set by the toolbox that runs
        them; empty: the user only talks)."""

    def offer(self, specs: Sequence[Any]) -> None:
        """Give the user these tools (``ToolSpec``s of ``user.tools``)."""
        self.tools = [_function(s) for s in specs]

    @property
    def fields(self) -> frozenset[str]:
        """The task fields the user's instructions read."""
        return self._template.variables

    def instructions(self, task: Task) -> str:
        text = self._template.render(task).strip()
        stop = self.spec.stop
        if stop not in text:
            text += (
                f"\n\nWhen your request has been handled, or cannot be, write {stop} on its own "
                "to end the conversation."
            )
        return text

    def request(
        self,
        task: Task,
        dialogue: Sequence[Exchange],
        message: str,
        calls: Sequence[UserCall] = (),
        last_round: bool = False,
    ) -> dict[str, Any]:
        """The chat request for the user's next turn: ``dialogue`` holds the earlier turns,
        ``message`` the agent's new message and ``calls`` the user's tool calls since it;
        ``last_round``: no more tool calls are allowed (``tool_choice: none``)."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": self.instructions(task)}]
        for exchange in dialogue:
            messages.append({"role": "user", "content": exchange.said})
            messages += _rounds(exchange.calls)
            messages.append({"role": "assistant", "content": exchange.heard})
        messages.append({"role": "user", "content": message})
        messages += _rounds(calls)
        spec = self.spec
        body = chat_body(spec.model, messages, spec.temperature, spec.max_tokens, spec.extra_body)
        if self.tools:
            body["tools"] = self.tools
            if last_round:
                body["tool_choice"] = "none"
        return body

    def _turn(self, text: str, cached: bool = False) -> UserTurn | None:
        """The turn in ``text``; None when it is not one (empty once the marker is removed
        and no marker either)."""
        stop = self.spec.stop
        stopped = stop in text
        shown = text.replace(stop, "").strip()
        if not shown and not stopped:
            return None
        return UserTurn(shown, stopped, cached)

    async def reply(
        self,
        task: Task,
        dialogue: Sequence[Exchange],
        message: str,
        secrets: dict[str, str],
        act: Act | None = None,
    ) -> UserTurn:
        """The user's answer to ``message``; with tools and ``act``, its tool calls are run
        through ``act`` first (at most ``max_tool_rounds`` rounds).

        Raises:
            UserUnavailable: no valid turn after the retries.
        """
        key = resolve_api_key(self.spec.api_key_secret, self.spec.api_key_env, secrets)
        models: dict[bool, ChatModel] = {}  # this turn's clients: tools allowed, or text only
        calls: list[UserCall] = []
        try:
            for round_no in range(self.spec.max_tool_rounds + 1):
                last = act is None or round_no == self.spec.max_tool_rounds
                answer = await self._ask(models, key, task, dialogue, message, calls, last)
                requested = answer.get("tool_calls") or []
                if not requested or act is None or last:
                    turn = self._turn(str(answer.get("content") or ""), cached=bool(answer.get("cached")))
                    assert turn is not None  # _ask returns turns only, or tool calls
                    return UserTurn(turn.text, turn.stopped, turn.cached, tuple(calls))
                for i, request in enumerate(requested):
                    calls.append(await self._act(act, request, round_no, i))
            raise AssertionError("unreachable: the last round asks for text")  # pragma: no cover
        finally:
            for model in models.values():
                await model.aclose()

    def _model(self, models: dict[bool, ChatModel], api_key: str | None, body: dict[str, Any]) -> ChatModel:
        """The turn's client for requests like ``body`` (made on first use; its sampling is the
        request's fields besides the model, messages and tools, the same for every request of a
        kind: tools allowed, or text only)."""
        kind = body.get("tool_choice") == "none"
        model = models.get(kind)
        if model is None:
            extra = {k: v for k, v in body.items() if k not in ("model", "messages", "tools")}
            model = models[kind] = ChatModel(
                self.spec.base_url, self.spec.model, api_key=api_key, sampling=Sampling(extra=extra),
                retry=self._retry, timeout=self.spec.timeout, usage=self.usage,
            )  # fmt: skip
        return model

    async def _act(self, act: Act, request: dict[str, Any], round_no: int, i: int) -> UserCall:
        """Run one requested tool call (refused when it is past the round's bound or its
        arguments are not a JSON object)."""
        fn = request.get("function") if isinstance(request, dict) else None
        fn = fn if isinstance(fn, dict) else {}
        name = str(fn.get("name") or "")
        raw = fn.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw if raw is not None else {}
        except ValueError:
            args = None
        if i >= MAX_CALLS_PER_ROUND:
            return await act(name, {}, round_no, f"at most {MAX_CALLS_PER_ROUND} tool calls per reply")
        if not isinstance(args, dict):
            return await act(name, {}, round_no, "the arguments are not a JSON object")
        return await act(name, args, round_no, None)

    async def _ask(
        self,
        models: dict[bool, ChatModel],
        api_key: str | None,
        task: Task,
        dialogue: Sequence[Exchange],
        message: str,
        calls: Sequence[UserCall],
        last: bool,
    ) -> dict[str, Any]:
        """One reply of the user model: ``{content, tool_calls}`` (tool calls only when it
        made some and more are allowed), from the cache or the endpoint; an empty reply is
        asked again.

        Raises:
            UserUnavailable: no valid reply after the retries.
        """
        body = (
            self.request(task, dialogue, message, calls, last)
            if self._template.bounded
            else await deadlines.offload(self.request, task, dialogue, message, calls, last)
        )
        key = cache_key({"v": CACHE_VERSION, "base_url": self.spec.base_url, **body})
        if self._cache is not None:
            hit = await self._cache.get(key)
            answer = self._answer(hit, last) if hit is not None else None
            if answer is not None:
                return {**answer, "cached": True}
        model = self._model(models, api_key, body)
        attempts = self._retry.attempts()
        while True:
            try:
                raw = await model.complete(body["messages"], body.get("tools") or [])
            except ModelError as exc:
                raise UserUnavailable(f"the simulated user is unavailable: {exc.message}") from None
            stored = _stored(raw)
            answer = self._answer(stored, last)
            if answer is not None:
                if self._cache is not None:
                    await self._cache.put(key, stored)
                return answer
            if not await attempts.retry("the reply is empty (not a turn)"):
                raise UserUnavailable(f"the simulated user gave no turn: {attempts.gave_up()}")

    def _answer(self, stored: str, last: bool) -> dict[str, Any] | None:
        """The reply kept as ``stored`` (its text, or JSON with tool calls): None when it is not
        a turn (no tool calls that may run, and no text once the stop marker is removed)."""
        content, tool_calls = stored, []
        if self.tools and stored.startswith("{"):
            try:
                data = json.loads(stored)
                content, tool_calls = str(data.get("content") or ""), list(data.get("tool_calls") or [])
            except (ValueError, AttributeError, TypeError):
                pass
        if tool_calls and not last:
            return {"content": content, "tool_calls": tool_calls}
        return {"content": content} if self._turn(content) is not None else None


def _stored(answer: dict[str, Any]) -> str:
    """How a reply is kept: its text, or JSON of its text and tool calls when it made some."""
    text = reply_text(answer) or ""
    try:
        tool_calls = answer["choices"][0]["message"].get("tool_calls")
    except (KeyError, IndexError, TypeError, AttributeError):
        tool_calls = None
    if not tool_calls or not isinstance(tool_calls, list):
        return text
    return json.dumps({"content": text, "tool_calls": tool_calls}, sort_keys=True)


def _rounds(calls: Sequence[UserCall]) -> list[dict[str, Any]]:
    """The user's tool calls as chat messages: per round, its assistant message with the calls,
    then one ``tool`` message per result."""
    out: list[dict[str, Any]] = []
    rounds = sorted({c.round for c in calls})
    for r in rounds:
        made = [c for c in calls if c.round == r]
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.input, sort_keys=True)},
                    }
                    for c in made
                ],
            }
        )
        out += [{"role": "tool", "tool_call_id": c.id, "content": c.output} for c in made]
    return out
