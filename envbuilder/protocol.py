"""The ORS wire protocol as pydantic models: content blocks, messages, tools, outputs, requests.

Field order is serialisation order, and optional fields are always emitted (as ``null``):
both reference clients index some of them directly (see docs/protocol.md §2).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

JSONObject = dict[str, Any]


def _storable(value: JSONObject) -> JSONObject:
    """A client's JSON as the server can keep it: sessions are stored as JSON whose integers
    have 64 bits, so a larger integer is refused here (422) rather than failing later."""
    try:
        orjson.dumps(value)
    except TypeError:
        raise ValueError("holds an integer outside the 64-bit range; send large numbers as strings") from None
    return value


ClientObject = Annotated[JSONObject, AfterValidator(_storable)]
"""A JSON object a client sends that the server keeps (a ``task_spec``, a tool call's input)."""

#: Block types a conversation served by envbuilder may contain (advertised in tool listings).
MESSAGE_BLOCK_TYPES = ["text", "image", "reasoning", "tool_call", "tool_result"]

#: Which block types each role may carry (Anthropic placement semantics); the one copy of the rule.
BLOCK_PLACEMENT: dict[str, frozenset[str]] = {
    "system": frozenset({"text", "image"}),
    "user": frozenset({"text", "image", "tool_result"}),
    "assistant": frozenset({"text", "image", "reasoning", "tool_call"}),
}


def check_placement(role: str, block_types: Iterable[str]) -> None:
    """Raise ValueError for the first block type ``role`` may not carry (see :data:`BLOCK_PLACEMENT`)."""
    allowed = BLOCK_PLACEMENT[role]
    for kind in block_types:
        if kind not in allowed:
            raise ValueError(
                f"A {kind!r} block is not valid in a {role!r} message: reasoning "
                "and tool_call blocks belong in 'assistant' turns, tool_result blocks in "
                "'user' turns (Anthropic placement semantics)."
            )


class TextBlock(BaseModel):
    text: str
    detail: JSONObject | None = None
    type: Literal["text"] = "text"


class ImageBlock(BaseModel):
    data: str
    """Base64-encoded image bytes."""
    mimeType: str
    detail: JSONObject | None = None
    type: Literal["image"] = "image"


class ReasoningBlock(BaseModel):
    text: str
    signature: str | None = None
    detail: JSONObject | None = None
    type: Literal["reasoning"] = "reasoning"


class ToolCallBlock(BaseModel):
    id: str
    name: str
    input: JSONObject
    detail: JSONObject | None = None
    type: Literal["tool_call"] = "tool_call"


ContentBlock = Annotated[TextBlock | ImageBlock, Field(discriminator="type")]


class ToolResultBlock(BaseModel):
    tool_call_id: str
    blocks: list[ContentBlock]
    is_error: bool = False
    detail: JSONObject | None = None
    type: Literal["tool_result"] = "tool_result"


AnyBlock = Annotated[
    TextBlock | ImageBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock,
    Field(discriminator="type"),
]


class Message(BaseModel):
    role: Literal["system", "user", "assistant"]
    blocks: list[AnyBlock]
    detail: JSONObject | None = None

    @model_validator(mode="after")
    def _check_placement(self) -> Message:
        check_placement(self.role, (block.type for block in self.blocks))
        return self


class ToolOutput(BaseModel):
    blocks: list[ContentBlock]
    metadata: JSONObject | None = None
    reward: float | None = None
    finished: bool = False


class RunToolSuccess(BaseModel):
    ok: Literal[True] = True
    output: ToolOutput


_new = object.__new__
_set = object.__setattr__


def _built(cls: type[Any], values: dict[str, Any], given: set[str]) -> Any:
    """An instance of ``cls`` holding ``values`` (every field, each already of its field's type)
    as ``cls(**{k: values[k] for k in given})`` would hold them, without running validation:
    what ``model_construct`` does, without its per-field loop."""
    out = _new(cls)
    _set(out, "__dict__", values)
    _set(out, "__pydantic_fields_set__", given)
    _set(out, "__pydantic_extra__", None)
    _set(out, "__pydantic_private__", None)
    return out


def text_output(text: str, metadata: JSONObject | None, reward: float | None, finished: bool) -> ToolOutput:
    """``ToolOutput(blocks=[TextBlock(text=text)], metadata=metadata, reward=reward,
    finished=finished)``, equal to it and serialised byte for byte the same, built without
    validating what is already valid (an episode builds one per graded answer). ``metadata`` is
    kept, not copied: pass a dict nobody changes after. Values of other types than the fields'
    own (an int reward, which validation turns into a float; a key that is not a string) go
    through validation as ever."""
    if (
        type(text) is str
        and (reward is None or type(reward) is float)
        and type(finished) is bool
        and (metadata is None or type(metadata) is dict)
    ):
        # (every key a str: a loop, which costs half what a set of their types does, inline)
        for key in metadata or ():
            if type(key) is not str:
                break
        else:
            block = _built(TextBlock, {"text": text, "detail": None, "type": "text"}, {"text"})
            values = {"blocks": [block], "metadata": metadata, "reward": reward, "finished": finished}
            return _built(ToolOutput, values, {"blocks", "metadata", "reward", "finished"})
    return ToolOutput(blocks=[TextBlock(text=text)], metadata=metadata, reward=reward, finished=finished)


ToolErrorReason = Literal["not_found", "name_collision", "input_validation", "episode_finished"]


class RunToolError(BaseModel):
    ok: Literal[False] = False
    error: str
    reason: ToolErrorReason | None = None


RunToolOutput = RunToolSuccess | RunToolError


def call_result(out: ToolOutput | RunToolError) -> RunToolSuccess | RunToolError:
    """What a tool call answers on the wire for ``out``: an error as it is, an output as
    ``RunToolSuccess(output=out)`` (which keeps a ``ToolOutput`` as it is), built without running
    validation over it again."""
    if type(out) is ToolOutput:
        return _built(RunToolSuccess, {"ok": True, "output": out}, {"output"})
    return out if isinstance(out, RunToolError) else RunToolSuccess(output=out)


class ToolSpec(BaseModel):
    """Exactly these three keys: both reference clients build a dataclass from them."""

    name: str
    description: str
    input_schema: JSONObject | None = None


class TerminalToolSpec(BaseModel):
    name: str
    arg: str | None = None
    description: str


class ListToolsOutput(BaseModel):
    tools: list[ToolSpec]
    terminal_tool: TerminalToolSpec | None = None
    supports_score_group: bool | None = False
    message_block_types: list[str] | None = None


class Split(BaseModel):
    name: str
    type: Literal["train", "validation", "test"]


# ---------------------------------------------------------------------------------------------
# Requests (unknown fields are refused with 422, as in both reference servers)


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SplitRequest(_Request):
    split: str


class TaskRequest(_Request):
    split: str
    index: int


class TaskRangeRequest(_Request):
    split: str
    start: int | None = None
    stop: int | None = None


class CreateRequest(_Request):
    env_name: str | None = None
    task_spec: ClientObject | None = None
    split: str | None = None
    index: int | None = None
    secrets: dict[str, str] | None = None
    toolset_name: str | None = None

    @model_validator(mode="after")
    def _one_task_source(self) -> CreateRequest:
        by_index = self.split is not None and self.index is not None
        partial_index = self.split is not None or self.index is not None
        if (self.task_spec is not None) == partial_index or (partial_index and not by_index):
            raise ValueError("Provide either task_spec or both split and index, not both/neither")
        return self


class CallRequest(_Request):
    name: str
    input: ClientObject
    task_id: str | None = None


# ---------------------------------------------------------------------------------------------
# Responses that are not lists of the types above


class StatusResponse(BaseModel):
    status: str = "ok"


class VersionResponse(BaseModel):
    version: str
    build_sha: str | None = None


class SidResponse(BaseModel):
    sid: str


class TasksResponse(BaseModel):
    tasks: list[JSONObject]
    env_name: str


class NumTasksResponse(BaseModel):
    num_tasks: int


class TaskResponse(BaseModel):
    task: JSONObject
    env_name: str


class ErrorResponse(BaseModel):
    detail: str
