"""One episode of a compiled spec driven in this process, without HTTP: the one in-process driver.

The trainers' adapters (:mod:`envbuilder.integrations`) and eval's in-process backend both play
episodes through :class:`LocalEpisode`: the task, its prompt and tools, each call's output and
reward under the one reward convention. Async callers use :meth:`LocalEpisode.acall` on their own
loop; synchronous callers use :meth:`LocalEpisode.call` (see :func:`envbuilder.threadloop.run_sync`).
The adapters use :meth:`LocalEpisode.step` and :meth:`LocalEpisode.astep`, which give a graded
answer as the episode's :class:`~envbuilder.episode.Reply` (no wire model is built for it).
"""

from __future__ import annotations

from typing import Any

from envbuilder.environment import Environment
from envbuilder.episode import Episode, Reply, output_of, reward_of
from envbuilder.protocol import ContentBlock, RunToolError, RunToolSuccess, TextBlock, ToolOutput, ToolSpec
from envbuilder.threadloop import run_sync

__all__ = ["LocalEpisode", "text_of"]


def text_of(blocks: list[ContentBlock] | list[Any]) -> str:
    """The text blocks of a prompt or a tool output, joined by newlines (images are left out)."""
    if len(blocks) == 1 and type(blocks[0]) is TextBlock:  # most outputs: one text, no join
        return blocks[0].text
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock) and b.text)


class LocalEpisode:
    """One episode of ``env`` on one task, in process: the prompt, the tools, the calls.

    Rewards follow the one convention (README, "Rewards"): only the call that ends the episode
    carries a reward, so :attr:`reward` is both the sum and the last non-null step reward.
    """

    # (a plain class with slots, not a dataclass: one is made per answer, so its making is
    # part of each answer's cost)
    __slots__ = ("env", "outputs", "rewards", "secrets", "state", "task")

    def __init__(self, env: Environment, task: dict[str, Any], secrets: dict[str, str] | None = None):
        self.env = env
        self.task = task
        self.secrets: dict[str, str] = {} if secrets is None else secrets
        self.rewards: list[float | None] = []
        """Each call's reward, in order (None for calls that carry none, and for refused calls)."""
        self.outputs: list[Reply | ToolOutput | RunToolError] = []
        self.state = Episode(task=task, secrets=dict(self.secrets))
        """The episode's state, as the server keeps it for a session."""

    @classmethod
    def of(
        cls, env: Environment, split: str, index: int, secrets: dict[str, str] | None = None
    ) -> LocalEpisode:
        """The episode on task ``index`` of ``split`` (TaskNotFound when there is no such task)."""
        try:
            view = env.splits[split]
        except KeyError:
            view = env.split(split)  # (its error: TaskNotFound)
        return cls(env, view.task(index), secrets)

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
        for reward in reversed(self.rewards):  # (a loop, not a generator: read once per answer)
            if reward is not None:
                return reward
        return None

    @property
    def void(self) -> str | None:
        """Why the episode is void (it ended ungraded for a reason outside the agent's answer: a
        judge that is down, a sandbox that cannot start), None otherwise. A void episode has no
        reward, and each integration hands it to its trainer as a skipped sample, never as 0."""
        if not self.state.finished or self.reward is not None:
            return None
        for out in reversed(self.outputs):
            if (isinstance(out, Reply) or type(out) is ToolOutput) and out.finished:
                reason = (out.metadata or {}).get("void")
                return str(reason) if reason else None
        return None

    async def run_tool(self, name: str, tool_input: dict[str, Any]) -> RunToolSuccess | RunToolError:
        """Run one tool call on the caller's loop and record it; the wire result."""
        result = await self.env.toolbox.call(self.state, name, tool_input)  # (Environment.call_tool)
        self._kept(result.output if result.ok else result)  # the output (an error as it is)
        return result

    def _kept(self, out: Reply | ToolOutput | RunToolError) -> Reply | ToolOutput | RunToolError:
        """``out``, recorded as this episode's next call."""
        self.outputs.append(out)
        self.rewards.append(reward_of(out))
        return out

    async def astep(self, name: str, tool_input: dict[str, Any]) -> Reply | ToolOutput | RunToolError:
        """Run one tool call on the caller's loop: a graded answer's output as the episode's
        :class:`Reply` (its text, metadata, reward and end, without the wire's model), any other
        output or error as it is (:meth:`acall` gives each as the wire's model)."""
        toolbox = self.env.toolbox
        if name == toolbox.answer_tool:  # (its output itself, without the wire's wrapper)
            return self._kept(await toolbox.answer(self.state, tool_input))
        result = await self.run_tool(name, tool_input)
        return result.output if result.ok else result

    def step(self, name: str, tool_input: dict[str, Any]) -> Reply | ToolOutput | RunToolError:
        """:meth:`astep` from synchronous code (without an asyncio task until it waits, for the
        tools whose calls never ask for one before: ``Toolbox.taskless``)."""
        toolbox = self.env.toolbox
        if name == toolbox.answer_tool:  # (its output itself, without the wire's wrapper)
            return self._kept(
                run_sync(toolbox.answer(self.state, tool_input), task=name not in toolbox.taskless)
            )
        result = run_sync(self.run_tool(name, tool_input))
        return result.output if result.ok else result

    async def acall(self, name: str, tool_input: dict[str, Any]) -> ToolOutput | RunToolError:
        """Run one tool call (on the caller's loop: from synchronous code use :meth:`call`)."""
        return output_of(await self.astep(name, tool_input))

    def call(self, name: str, tool_input: dict[str, Any]) -> ToolOutput | RunToolError:
        """Run one tool call from synchronous code (:meth:`step`, as the wire's model)."""
        return output_of(self.step(name, tool_input))

    async def aend(self) -> None:
        """:meth:`end` from async code (nothing to await when the tools hold nothing)."""
        if self.env.toolbox.cleanup:  # (Environment.cleanup)
            await self.env.end_session(self.state)

    def end(self) -> None:
        """Release what this episode's tools hold (a sandbox folder, a browser page). A spec
        whose tools hold nothing per session has nothing to run (no event loop turn)."""
        if self.env.toolbox.cleanup:  # (Environment.cleanup)
            run_sync(self.aend())
