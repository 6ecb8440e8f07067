"""The agent loop: the model talks, tools run, until the episode is finished or turns run out."""

from __future__ import annotations

import json
import time
from typing import Any

from envbuilder.client import convert_messages, convert_tools
from envbuilder.eval._answer import AnswerTool
from envbuilder.eval._backends import EpisodeHandle
from envbuilder.llm import ChatModel, ModelError

__all__ = ["absorb", "conclude", "run_episode"]

NUDGE = "You did not call a tool. To continue, call one of the tools: {names}."
#: Text mode: the model's message was empty, so there is nothing to submit.
EMPTY = "Your message was empty. Reply with your answer."


def _tool_text(output: dict[str, Any]) -> str:
    parts = []
    for block in output.get("blocks") or []:
        parts.append(block.get("text", "") if block.get("type") == "text" else f"[{block.get('type')}]")
    return "\n".join(parts)


def _assistant(message: dict[str, Any]) -> dict[str, Any]:
    """The model's message as it goes back into the conversation (no nulls, no extras)."""
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("reasoning_content"):
        out["reasoning_content"] = message["reasoning_content"]
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    return out


async def run_episode(
    handle: EpisodeHandle, model: ChatModel, max_turns: int, answer_tool: AnswerTool | None = None
) -> dict[str, Any]:
    """Play one episode; the trajectory as a JSON-ready dict. Never raises for model errors:
    they end the episode with ``status: "error"``.

    With ``answer_tool`` (``--answer text``) a reply without tool calls is the answer: its text
    is submitted to that tool, which the model is not offered (other tools still are).
    """
    started = time.monotonic()
    specs = await handle.tools()
    if answer_tool is not None:
        specs = [t for t in specs if t.name != answer_tool.name]
    tools = convert_tools(specs, "chat_completions")
    names = ", ".join(t.name for t in specs)
    messages: list[dict[str, Any]] = convert_messages(await handle.messages(), "openai")
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    calls: list[dict[str, Any]] = []
    record: dict[str, Any] = {
        "task_id": handle.task_id,
        "status": "max_turns",
        "reward": None,
        "finished": False,
        "metadata": None,
        "turns": 0,
        "usage": usage,
        "messages": messages,
        "tool_calls": calls,
        "error": None,
        "error_reason": None,
    }

    def took(result: dict[str, Any]) -> str:
        return absorb(record, result)

    for turn in range(1, max_turns + 1):
        record["turns"] = turn
        try:
            reply = await model.complete(messages, tools)
        except ModelError as exc:
            record.update(status="error", error=str(exc), error_reason=exc.reason)
            break
        for key in usage:
            value = (reply.get("usage") or {}).get(key)
            usage[key] += value if isinstance(value, int) else 0
        message = _assistant(reply["choices"][0]["message"])
        messages.append(message)
        if not message.get("tool_calls"):
            if answer_tool is None:
                messages.append({"role": "user", "content": NUDGE.format(names=names)})
                continue
            content = message.get("content")
            text = content if isinstance(content, str) else ""
            if not text.strip():
                messages.append({"role": "user", "content": EMPTY})
                continue
            arguments = {answer_tool.arg: text}
            result = await handle.call(answer_tool.name, arguments)
            submitted = json.dumps(arguments)
            sent = {"turn": turn, "id": None, "name": answer_tool.name, "arguments": submitted}
            calls.append({**sent, "via": "text", "result": result})
            messages.append({"role": "user", "content": took(result)})
            if record["finished"]:
                record["status"] = "finished"
                break
            continue
        for call in message["tool_calls"]:
            call = call if isinstance(call, dict) else {}
            fn: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else {}
            name, raw = str(fn.get("name", "")), fn.get("arguments")
            entry: dict[str, Any] = {"turn": turn, "id": call.get("id"), "name": name, "arguments": raw}
            try:
                args = json.loads(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
                if not isinstance(args, dict):
                    raise ValueError("not a JSON object")
            except ValueError as exc:
                entry["error"] = f"the arguments of {name!r} are not a JSON object ({exc})"
                content = f"Error: {entry['error']}. Call the tool again with valid JSON arguments."
            else:
                entry["result"] = result = await handle.call(name, args)
                content = took(result)
            calls.append(entry)
            messages.append({"role": "tool", "tool_call_id": entry["id"] or "", "content": content})
            if record["finished"]:
                break
        if record["finished"]:
            record["status"] = "finished"
            break
    conclude(record)
    record["duration_s"] = round(time.monotonic() - started, 3)
    return record


def absorb(record: dict[str, Any], result: dict[str, Any]) -> str:
    """Fold a tool's wire result (``{"ok": …}``) into the episode's record; the text the model
    sees. The record's ``last_reward`` is the reward of the last output (None: ungraded)."""
    if not result.get("ok"):
        return f"Error: {result.get('error')}"
    output = result["output"]
    record["last_reward"] = output.get("reward")
    if output.get("reward") is not None:
        record["reward"] = output["reward"]
    record["metadata"] = output.get("metadata")
    record["finished"] = bool(output.get("finished"))
    return _tool_text(output)


def conclude(record: dict[str, Any]) -> None:
    """Set how a played (or replayed) episode ended: ``ungradeable`` and ``correct``."""
    final_reward = record.pop("last_reward", None)
    record["ungradeable"] = bool(record["finished"] and final_reward is None)
    record["correct"] = _correct(record)


def _correct(record: dict[str, Any]) -> bool:
    metadata = record.get("metadata") or {}
    if isinstance(metadata, dict) and "outcome" in metadata:
        return metadata["outcome"] == "correct"
    return record["reward"] is not None and record["reward"] >= 1.0
