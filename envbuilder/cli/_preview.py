"""``envbuilder preview SPEC``: real tasks as the model sees them, the tools, the grading target."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from envbuilder.cli import _console
from envbuilder.cli._output import fail_on_errors
from envbuilder.cli._pull import TrustCodeOption
from envbuilder.errors import EnvbuilderError


def preview(
    spec: Annotated[Path, typer.Argument(help="The spec file (YAML).", exists=True, dir_okay=False)],
    split: Annotated[str | None, typer.Option(help="The split to show (default: the first).")] = None,
    n: Annotated[
        int | None, typer.Option("-n", help="How many tasks to show, from the first (default 1).", min=1)
    ] = None,
    index: Annotated[
        int | None, typer.Option("--index", "-i", help="Show only the task at this index.")
    ] = None,
    trust_code: TrustCodeOption = False,
) -> None:
    """Show the rendered prompt of real tasks, the tools, and each task's grading target."""
    from envbuilder.environment import load_environment

    with fail_on_errors():
        env = load_environment(spec, trust_code=True if trust_code else None)
    name = split or next(iter(env.splits))
    if name not in env.splits:
        raise typer.BadParameter(
            f"{name!r} is not a split of {env.name} (its splits: {', '.join(env.splits)})",
            param_hint="--split",
        )
    view = env.split(name)
    if index is not None and n is not None:
        raise typer.BadParameter("give either -n or --index, not both", param_hint="-n / --index")
    if index is not None:
        if not -len(view) <= index < len(view):
            raise typer.BadParameter(
                f"{index} is out of range: split {name!r} has {len(view):,} tasks", param_hint="--index"
            )
        indices = [index]
    else:
        indices = list(range(min(n or 1, len(view))))

    _console.line(f"{env.name}: {env.summary()} tasks", "bold")
    _console.line()
    _console.line("Tools", "bold")
    for tool in env.task_tools_listing.tools:
        _console.line(f"  {tool.name}{_terms(env, tool.name)}: {tool.description}", "cyan")
        schema = tool.input_schema or {}
        required = set(schema.get("required", []))
        for param, prop in schema.get("properties", {}).items():
            kind = prop.get("type", "any")
            need = "required" if param in required else "optional"
            desc = f": {prop['description']}" if prop.get("description") else ""
            _console.line(f"    {param} ({kind}, {need}){desc}")
    with fail_on_errors():
        for i in indices:
            try:
                _show_task(env, name, view.task(i), i)
            except EnvbuilderError as exc:  # say which task: a template may fail on one row only
                raise EnvbuilderError(
                    f"task {name}[{i}]: {exc.message}", hint=exc.hint, code=exc.code
                ) from None


def _show_task(env: Any, name: str, task: Any, i: int) -> None:
    """The task's conversation as the model sees it, the dialogue's later turns, the targets."""
    _console.line()
    _console.line(f"── {name}[{i}]  id {task.get('id')} ──", "bold")
    for message in env.messages(task):
        _console.line(f"[{message.role}]", "magenta")
        for block in message.blocks:
            for text in _block(block):
                _console.line(text)
    assert env.submit is not None
    dialogue = env.submit.dialogue
    if dialogue is not None:
        replies = [f"<reply {k + 1}>" for k in range(dialogue.count(task))]
        for k, text in enumerate(dialogue.user_turns(task, replies)[1:], 1):
            _console.line(f"[user, revealed by reply {k}]", "magenta")
            _console.line(text)
        plan = dialogue.spec
        _console.line(f"[dialogue] grade {plan.grade}, episode reward: {plan.reward}", "green")
    for k, target in enumerate(env.submit.turn_targets(task)):
        label = f"[target, reply {k + 1}]" if dialogue is not None else "[target]"
        _console.line(f"{label} {_target(target)}", "green")


def _terms(env: Any, name: str) -> str:
    """`` (calculator; at most 2 calls, costs 0.25 each)``: a declared tool's type and terms."""
    declared = env.toolbox.declared.get(name)
    if declared is None:
        return ""
    config = declared.config
    terms = [
        f"at most {config.max_calls} call{'s' if config.max_calls != 1 else ''}" if config.max_calls else "",
        f"costs {config.cost:g} reward a call" if config.cost else "",
        "task-scoped (/task_tools only)" if config.task_scoped else "",
        "ends the episode" if config.terminal else "",
    ]
    return f" ({'; '.join([config.type, *filter(None, terms)])})"


def _block(block: Any) -> list[str]:
    """The lines that show one content block."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text).splitlines() or [""]
    if kind == "image":
        return [f"[image {block.mimeType}, {_size(block.data)}]"]
    if kind == "reasoning":
        return [f"[reasoning] {line}" for line in str(block.text).splitlines()]
    if kind == "tool_call":
        return [f"[tool call {block.name}] {json.dumps(block.input, ensure_ascii=False)}"]
    if kind == "tool_result":
        return [f"[tool result {block.tool_call_id}]"] + [x for b in block.blocks for x in _block(b)]
    return [f"[{kind} block]"]


def _size(data: str) -> str:
    try:
        n = len(base64.b64decode(data, validate=False))
    except ValueError:
        n = len(data) * 3 // 4
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def _target(target: Any) -> str:
    if target is None:
        return "(the grader states no target)"
    if isinstance(target, list | tuple):
        return " | ".join(str(t) for t in target)
    return str(target)
