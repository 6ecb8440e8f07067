"""A simulated user: an OpenAI-compatible model plays the user of a task, turn by turn.

The agent's text never reaches an ORS server, so the conversation goes through the answer tool
(``send_message``): each call's input is the agent's message and its output the user's reply.
The episode keeps only its transcript (the calls), from which the conversation is rebuilt for
every turn, so a session stays small and any worker can serve the next turn.

The user model sees its instructions (the spec's ``user.template`` over the task) as the system
message, and the dialogue with the roles swapped (the agent's messages as ``user``, its own as
``assistant``). Its calls follow the shared retry policy (:mod:`envbuilder.retry`); a reply that
is not a turn (empty) is asked again and never cached, and valid replies are cached like a
judge's, keyed by the whole request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envbuilder import budget
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

__all__ = ["SimulatedUser", "UserTurn", "UserUnavailable"]


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

    def request(self, task: Task, dialogue: Sequence[tuple[str, str]], message: str) -> dict[str, Any]:
        """The chat request for the user's next turn: ``dialogue`` holds the earlier (agent
        message, user reply) pairs, ``message`` the agent's new message."""
        messages = [{"role": "system", "content": self.instructions(task)}]
        for said, heard in dialogue:
            messages.append({"role": "user", "content": said})
            messages.append({"role": "assistant", "content": heard})
        messages.append({"role": "user", "content": message})
        spec = self.spec
        return chat_body(spec.model, messages, spec.temperature, spec.max_tokens, spec.extra_body)

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
        self, task: Task, dialogue: Sequence[tuple[str, str]], message: str, secrets: dict[str, str]
    ) -> UserTurn:
        """The user's answer to ``message``.

        Raises:
            UserUnavailable: no valid turn after the retries.
        """
        body = (
            self.request(task, dialogue, message)
            if self._template.bounded
            else await budget.offload(self.request, task, dialogue, message)
        )
        key = cache_key({"base_url": self.spec.base_url, **body})
        if self._cache is not None:
            cached = await self._cache.get(key)
            turn = self._turn(cached, cached=True) if cached is not None else None
            if turn is not None:
                return turn
        model = ChatModel(
            self.spec.base_url,
            self.spec.model,
            api_key=resolve_api_key(self.spec.api_key_secret, self.spec.api_key_env, secrets),
            sampling=Sampling(extra={k: v for k, v in body.items() if k not in ("model", "messages")}),
            retry=self._retry,
            timeout=self.spec.timeout,
            usage=self.usage,
        )
        attempts = self._retry.attempts()
        try:
            while True:
                try:
                    answer = await model.complete(body["messages"], [])
                except ModelError as exc:
                    raise UserUnavailable(f"the simulated user is unavailable: {exc.message}") from None
                text = reply_text(answer) or ""
                turn = self._turn(text)
                if turn is not None:
                    if self._cache is not None:
                        await self._cache.put(key, text)
                    return turn
                if not await attempts.retry("the reply is empty (not a turn)"):
                    raise UserUnavailable(f"the simulated user gave no turn: {attempts.gave_up()}")
        finally:
            await model.aclose()
