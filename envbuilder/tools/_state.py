"""The ``state`` tool: reads and updates of the episode's world document, declared in YAML.

A tool is a list of ``steps`` (``get``, ``find``, ``set``, ``append``, ``remove``,
``increment``, ``require``, ``let``, ``for_each``, ``new_id``: see
:mod:`envbuilder.tools._steps`), applied whole or not at all, over inputs of any JSON type and
with computed values (:mod:`envbuilder.tools._expr`). The older one-operation form (``op:``
with ``path``, ``where``, ``value``, ``require`` preconditions) is one step: ``op: get`` with
``path: users/{user_id}`` is ``steps: [{get: "users/{user_id}"}]``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from envbuilder.errors import ToolError
from envbuilder.plugins import ConfigModel
from envbuilder.tools._base import Tool, ToolCall, ToolConfig, ToolContext, ToolReply
from envbuilder.tools._expr import Value, check_names
from envbuilder.tools._steps import (
    MISSING,
    AppendStep,
    FindStep,
    GetStep,
    RemoveStep,
    SetStep,
    Step,
    Steps,
    _Path,
    resolve,
)

_MISSING = MISSING  # (the name tests and older code import)

__all__ = ["Requirement", "StateTool", "StateToolConfig", "resolve"]


class Requirement(ConfigModel):
    """A precondition of a call: what must hold at `path` before anything changes."""

    path: str = Field(min_length=1)
    """A path in the document, e.g. `orders/{order_id}/status`."""
    exists: bool = True
    """The path must exist (with `false`: must not)."""
    equals: Any = None
    """The value there must equal this (not checked when unset)."""
    one_of: list[Any] | None = None
    """The value there must be one of these."""
    error: str
    """What the agent reads when the precondition fails (formatted with the arguments)."""


class StateToolConfig(ToolConfig):
    """Reads and updates of the episode's state (`state:`): a list of `steps`, or one `op`."""

    type: Literal["state"]
    steps: list[Step] | None = None
    """What a call does, in order, all or nothing: `get`, `find`, `set`, `append`, `remove`,
    `increment`, `require`, `let`, `for_each`, `new_id` (see the tools how-to)."""
    op: Literal["get", "find", "set", "append", "remove"] | None = None
    """The one-operation form: `get` the value at `path`; `find` the key of the first item of
    the collection at `path` matching `where`; `set` `value` at `path`; `append` `value` to the
    list at `path`; `remove` the key at `path`."""
    path: str | None = Field(default=None, min_length=1)
    """With `op`: where in the document, as keys separated by `/`, with `{param}` for arguments."""
    where: dict[str, Any] | None = None
    """With `op: find`: item fields (a `/`-path inside the item) and the values they must equal."""
    value: Any = None
    """With `op: set` and `append`: the JSON value to put (strings may hold `{param}`)."""
    require: list[Requirement] = Field(default_factory=list)
    """With `op`: preconditions checked in order before the operation."""
    not_found: str = "{path} not found"
    """With `op`: the error text when `path` (or, for `find`, a match) does not exist; `{path}`
    is the path with the arguments filled in."""
    output: Any = None
    """The reply (may compute; `value` is the last step's result), e.g. `Account {account}
    unfrozen.` or `"{{ value.status }}"`; default: the last step's result (a found key as it
    is, anything else as JSON)."""

    @model_validator(mode="after")
    def _consistent(self) -> StateToolConfig:
        if self.steps is not None:
            given = [
                k
                for k in ("op", "path", "where", "value", "require", "not_found")
                if k in self.model_fields_set
            ]
            if given:
                raise ValueError(
                    f"`steps` replaces the one-operation keys: drop {', '.join(f'`{k}`' for k in given)}"
                )
            if not self.steps and self.output is None:
                raise ValueError("a tool without steps needs an `output:`")
            return self
        if self.op is None or self.path is None:
            raise ValueError("give `steps` (a list), or `op` with `path`")
        if (self.op == "find") != (self.where is not None):
            raise ValueError("`where` goes with `op: find`, and `find` needs it")
        if self.op in ("set", "append") and "value" not in self.model_fields_set:
            raise ValueError(f"`op: {self.op}` needs `value`")
        return self

    def as_steps(self) -> list[Any]:
        """The tool's steps (the one-operation form as its one step)."""
        if self.steps is not None:
            return list(self.steps)
        assert self.op is not None and self.path is not None
        common: dict[str, Any] = {self.op: self.path, "not_found": self.not_found}
        if self.op == "find":
            return [FindStep.model_validate({**common, "where": self.where})]
        if self.op in ("set", "append"):
            return [
                (SetStep if self.op == "set" else AppendStep).model_validate({**common, "value": self.value})
            ]
        return [(GetStep if self.op == "get" else RemoveStep).model_validate(common)]


class _Check:
    """A compiled `require:` entry of the one-operation form."""

    def __init__(self, req: Requirement, loc: tuple[str | int, ...], known: set[str]):
        self.req = req
        self.path = _Path(req.path, (*loc, "path"))
        self.equals = Value(req.equals, (*loc, "equals"))
        self.one_of = Value(req.one_of, (*loc, "one_of"))
        self.error = Value(req.error, (*loc, "error"))
        for key, names in (
            ("path", self.path.names),
            ("equals", self.equals.names),
            ("one_of", self.one_of.names),
            ("error", self.error.names),
        ):
            check_names(names, known, (*loc, key))

    def check(self, doc: Any, args: dict[str, Any]) -> None:
        req = self.req
        value = resolve(doc, self.path.keys(args), read_only=True)
        ok = (value is not MISSING) == req.exists
        if ok and value is not MISSING:
            if "equals" in req.model_fields_set and value != self.equals(args):
                ok = False
            if req.one_of is not None and value not in self.one_of(args):
                ok = False
        if not ok:
            raise ToolError(str(self.error(args)))


class StateTool(Tool):
    Config = StateToolConfig
    config: StateToolConfig
    uses_document = True
    description = "Read or update the record at a path."

    def __init__(self, config: StateToolConfig, context: ToolContext):
        super().__init__(config, context)
        known = set(config.input or {})
        self.checks = [_Check(r, ("require", i), known) for i, r in enumerate(config.require)]
        where = ("steps",) if config.steps is not None else ()
        try:
            self.steps = Steps(config.as_steps(), known, where, config.output)
        except ToolError as exc:
            if config.steps is None and exc.loc[:1] != ("output",):  # the one-operation form: its keys
                exc.loc = _legacy_loc(exc.loc)
            raise

    async def run(self, call: ToolCall) -> ToolReply:
        if call.document is None:
            raise ToolError("this tool needs the episode's state, and the spec declares no `state:`")
        for check in self.checks:
            check.check(call.document, call.args)
        return ToolReply.text(self.steps.run(call.document, call.args))


def _legacy_loc(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """A one-operation tool's key path (``(0, 'get')`` is its `path`)."""
    if len(loc) >= 2 and isinstance(loc[0], int):
        key = loc[1]
        return ("path", *loc[2:]) if key in ("get", "find", "set", "append", "remove") else loc[1:]
    return loc
