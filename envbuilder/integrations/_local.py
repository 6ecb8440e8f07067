"""In-process episodes for trainers: a spec's environment driven without HTTP.

Trainers call environments from synchronous code (TRL's tool methods, SkyRL's ``step``, verl's
``compute_score``) and from their own event loops (verl's async tools, verifiers). Synchronous
callers run each call on an event loop kept for their thread (no thread hop on the hot path,
and a judge's connections stay on the loop that opened them); callers inside a running loop
hand the call to one shared loop in a daemon thread, so no loop is ever nested.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from envbuilder.environment import Environment, load_environment
from envbuilder.episode import Episode
from envbuilder.protocol import ContentBlock, RunToolError, RunToolSuccess, TextBlock, ToolOutput, ToolSpec

T = TypeVar("T")

_lock = threading.Lock()
_shared: asyncio.AbstractEventLoop | None = None
_local = threading.local()


def _shared_loop() -> asyncio.AbstractEventLoop:
    global _shared
    with _lock:
        if _shared is None or _shared.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="envbuilder-integrations", daemon=True).start()
            _shared = loop
        return _shared


def submit(coro: Coroutine[Any, Any, T]) -> Future[T]:
    """Schedule ``coro`` on the shared loop (from async code: ``await asyncio.wrap_future(...)``)."""
    return asyncio.run_coroutine_threadsafe(coro, _shared_loop())


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end from synchronous code: on this thread's own loop, or on the
    shared loop when this thread is already running one."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        loop = getattr(_local, "loop", None)
        if loop is None or loop.is_closed():
            loop = _local.loop = asyncio.new_event_loop()
        return loop.run_until_complete(coro)
    return submit(coro).result()


@lru_cache(maxsize=64)
def _load(path: str) -> Environment:
    return load_environment(path)


@lru_cache(maxsize=256)
def _resolved(spec: str) -> str:
    return str(Path(spec).resolve())


def environment(spec: str | Path | Environment) -> Environment:
    """A compiled environment from a spec path (loaded once per process) or as given."""
    return spec if isinstance(spec, Environment) else _load(_resolved(str(spec)))


def text_of(blocks: list[ContentBlock] | list[Any]) -> str:
    """The text blocks of a prompt or a tool output, joined by newlines (images are left out)."""
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock) and b.text)


@dataclass
class LocalEpisode:
    """One episode of ``env`` on one task, in process: the prompt, the tools, the calls.

    Rewards follow the one convention (README, "Rewards"): only the call that ends the episode
    carries a reward, so :attr:`reward` is both the sum and the last non-null step reward.
    """

    env: Environment
    task: dict[str, Any]
    secrets: dict[str, str] = field(default_factory=dict)
    rewards: list[float | None] = field(default_factory=list)
    """Each call's reward, in order (None for calls that carry none, and for refused calls)."""
    outputs: list[ToolOutput | RunToolError] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.state = Episode(task=self.task, secrets=dict(self.secrets))

    @classmethod
    def of(
        cls, env: Environment, split: str, index: int, secrets: dict[str, str] | None = None
    ) -> LocalEpisode:
        """The episode on task ``index`` of ``split`` (TaskNotFound when there is no such task)."""
        return cls(env, env.split(split).task(index), secrets or {})

    @property
    def tools(self) -> list[ToolSpec]:
        """The tools this task offers (shared and task-scoped), as ORS tool specs."""
        return list(self.env.task_tools(self.task).tools)

    def prompt(self) -> str:
        """The task's prompt as text."""
        return text_of(self.env.prompt(self.task))

    def messages(self) -> list[dict[str, Any]]:
        """The task's conversation as chat messages (``role`` and text ``content``)."""
        return [{"role": m.role, "content": text_of(m.blocks)} for m in self.env.messages(self.task)]

    @property
    def finished(self) -> bool:
        return self.state.finished

    @property
    def reward(self) -> float | None:
        """The episode's reward: the last non-null step reward (None before one is given)."""
        return next((r for r in reversed(self.rewards) if r is not None), None)

    @property
    def void(self) -> str | None:
        """Why the episode is void (it ended ungraded for a reason outside the agent's answer: a
        judge that is down, a sandbox that cannot start), None otherwise. A void episode has no
        reward, and each integration hands it to its trainer as a skipped sample, never as 0."""
        if not self.finished or self.reward is not None:
            return None
        for out in reversed(self.outputs):
            if isinstance(out, ToolOutput) and out.finished:
                reason = (out.metadata or {}).get("void")
                return str(reason) if reason else None
        return None

    async def acall(self, name: str, tool_input: dict[str, Any]) -> ToolOutput | RunToolError:
        """Run one tool call (on the caller's loop: for the integrations' own loop use :meth:`call`)."""
        result = await self.env.call_tool(self.state, name, tool_input)
        out = result.output if isinstance(result, RunToolSuccess) else result
        self.outputs.append(out)
        self.rewards.append(out.reward if isinstance(out, ToolOutput) else None)
        return out

    def call(self, name: str, tool_input: dict[str, Any]) -> ToolOutput | RunToolError:
        """Run one tool call from synchronous code."""
        return run(self.acall(name, tool_input))

    async def aend(self) -> None:
        await self.env.end_session(self.state)

    def end(self) -> None:
        """Release what this episode's tools hold (a sandbox folder, a browser page)."""
        run(self.aend())


def describe(out: ToolOutput | RunToolError) -> str:
    """What the agent reads back from a call: its text, or the error."""
    if isinstance(out, RunToolError):
        return f"Error: {out.error}"
    return text_of(out.blocks) or "(no output)"
