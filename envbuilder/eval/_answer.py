"""How a model's answer reaches the environment: by calling a tool (``--answer tool``) or as its
plain final message (``--answer text``), submitted to the environment's answer tool.

In text mode the answer tool is the listing's ``terminal_tool`` (ORS: "harnesses pass the model's
plain final message to it"); an environment that advertises none but offers exactly one tool
with exactly one required argument gets that tool. Which one, and why, is stated before the run
starts: never a silent guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from envbuilder.errors import EnvbuilderError
from envbuilder.protocol import ListToolsOutput, ToolSpec

__all__ = ["ANSWER_MODES", "AnswerMode", "AnswerTool", "choose_answer_tool"]

AnswerMode = Literal["tool", "text"]
ANSWER_MODES: tuple[AnswerMode, ...] = ("tool", "text")


@dataclass(frozen=True)
class AnswerTool:
    """The tool a plain-text answer is submitted to, as ``{arg: text}``."""

    name: str
    arg: str
    why: str
    """``the environment's terminal_tool`` or ``its only tool``."""

    def describe(self) -> str:
        return f"{self.name}({self.arg}), {self.why}"


def _required(spec: ToolSpec) -> list[str]:
    schema: dict[str, Any] = spec.input_schema or {}
    required = schema.get("required")
    return [str(r) for r in required] if isinstance(required, list) else []


def choose_answer_tool(env: str, listing: ListToolsOutput) -> AnswerTool:
    """The tool ``--answer text`` submits to (see the module docstring).

    Raises:
        EnvbuilderError: the environment has no terminal tool and no single one-argument tool.
    """
    terminal = listing.terminal_tool
    by_name = {t.name: t for t in listing.tools}
    if terminal is not None:
        arg = terminal.arg
        if arg is None:
            spec = by_name.get(terminal.name)
            required = _required(spec) if spec is not None else []
            arg = required[0] if len(required) == 1 else None
        if arg is not None:
            return AnswerTool(terminal.name, arg, "the environment's terminal_tool")
    if len(listing.tools) == 1 and len(_required(listing.tools[0])) == 1:
        only = listing.tools[0]
        return AnswerTool(only.name, _required(only)[0], "its only tool")
    names = ", ".join(t.name for t in listing.tools) or "none"
    raise EnvbuilderError(
        f"--answer text: {env} advertises no terminal_tool and has no single answer tool (tools: {names})",
        hint="Run it with --answer tool, or declare `submit: {terminal_tool: true}` in its spec",
        code="no_answer_tool",
    )
