"""A conversation stored in a task field becomes ORS messages, with block placement checked."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from envbuilder.errors import DataError
from envbuilder.protocol import AnyBlock, Message, TextBlock
from envbuilder.spec import ConversationSpec

__all__ = ["ConversationReader"]

_ROLES = ("system", "user", "assistant")
_block_adapter: TypeAdapter[Any] = TypeAdapter(AnyBlock)


def _pydantic_reason(exc: ValidationError) -> str:
    err = exc.errors()[0]
    msg = str(err["msg"]).removeprefix("Value error, ")
    loc = ".".join(str(p) for p in err["loc"])
    return f"{msg} (at {loc})" if loc else msg


def _drop_nulls(block: Any) -> Any:
    """Parquet stores blocks as structs with every field of every block type, absent ones
    null: read a null field as absent (but keep a tool call's ``input`` as it is)."""
    if not isinstance(block, Mapping):
        return block
    out = {k: v for k, v in block.items() if v is not None}
    if isinstance(out.get("blocks"), list):
        out["blocks"] = [_drop_nulls(b) for b in out["blocks"]]
    return out


def _invalid(where: str, message: str, hint: str | None = None) -> DataError:
    return DataError(f"{where}: {message}", hint=hint, code="conversation_invalid")


class ConversationReader:
    """Reads the turns in ``task[spec.column]`` as messages; raises DataError naming the turn."""

    def __init__(self, spec: ConversationSpec):
        self.spec = spec

    def _blocks(self, content: Any, where: str) -> list[Any]:
        if isinstance(content, str):
            return [TextBlock(text=content)]
        if not isinstance(content, list):
            raise _invalid(where, f"expected a string or a list of blocks, got a {type(content).__name__}")
        blocks: list[Any] = []
        for j, item in enumerate(content):
            if isinstance(item, str):
                blocks.append(TextBlock(text=item))
                continue
            try:
                blocks.append(_block_adapter.validate_python(_drop_nulls(item)))
            except ValidationError as exc:
                raise _invalid(
                    f"{where}[{j}]",
                    f"not a valid block: {_pydantic_reason(exc)}",
                    hint="Blocks use the ORS wire shape, e.g. {type: text, text: ...}, "
                    "{type: tool_call, id, name, input}, {type: tool_result, tool_call_id, blocks}",
                ) from None
        return blocks

    def messages(self, task: Mapping[str, Any]) -> list[Message]:
        spec = self.spec
        turns = task.get(spec.column)
        if isinstance(turns, str):  # a conversation stored as JSON text
            try:
                turns = json.loads(turns)
            except ValueError:
                raise _invalid(spec.column, "the text is not a JSON list of turns") from None
        if not isinstance(turns, list):
            raise _invalid(
                spec.column,
                f"expected a list of turns, got {type(turns).__name__ if turns is not None else 'nothing'}",
            )
        out: list[Message] = []
        for i, turn in enumerate(turns):
            where = f"{spec.column}[{i}]"
            if not isinstance(turn, Mapping):
                raise _invalid(where, f"a turn must be an object, got a {type(turn).__name__}")
            raw_role = turn.get(spec.role_key)
            role = spec.roles.get(str(raw_role), raw_role)
            if role not in _ROLES:
                raise _invalid(
                    f"{where}.{spec.role_key}",
                    f"role {raw_role!r} is not system, user or assistant",
                    hint=f"Map it with `roles: {{{raw_role}: user}}` under prompt.conversation"
                    if isinstance(raw_role, str)
                    else f"Each turn needs a `{spec.role_key}` key",
                )
            if spec.content_key not in turn:
                raise _invalid(
                    where,
                    f"the turn has no key {spec.content_key!r}",
                    hint=f"Its keys are: {', '.join(map(str, turn))}; set prompt.conversation.content_key",
                )
            blocks = self._blocks(turn[spec.content_key], f"{where}.{spec.content_key}")
            try:
                out.append(Message(role=role, blocks=blocks))
            except ValidationError as exc:
                raise _invalid(where, _pydantic_reason(exc)) from None
        if not out:
            raise _invalid(spec.column, "the conversation is empty")
        return out
