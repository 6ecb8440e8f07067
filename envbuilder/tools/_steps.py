"""Declarative tool steps: what a ``state`` tool does to the world document, one step at a time.

A tool is a list of steps run in order against a world document (the episode's
:class:`~envbuilder.world.State`, or any mapping of the same shape) and the call's variables
(its inputs, then what each step binds with ``as:``). A step that fails (a missing record, a
``require`` that does not hold) raises :class:`~envbuilder.errors.ToolError` with the spec's
text, and the caller drops the document's changes: a tool is applied whole or not at all.
Who calls a tool (the agent, a simulated user) is not this module's concern:
:meth:`Steps.run` takes a document and variables and returns the reply's value.

Steps (each may also take ``when:``, a condition that skips it when false):

* ``get: path`` the value at a path; ``find: path`` the key of the first item of a collection
  whose fields equal ``where`` (and for which the expression ``if`` holds, with ``item`` and
  ``key``), or with ``all: true`` the keys of every match;
* ``set: path`` with ``value``; ``append: path`` with ``value``; ``remove: path``;
  ``increment: path`` by ``by`` (default 1, ``round`` to some decimals);
* ``require:`` a condition, with the ``error`` the agent reads when it does not hold;
* ``let:`` names bound to computed values; ``for_each:`` a list, binding each element to
  ``as`` for its own ``steps``; ``new_id: path`` a key the collection at the path does not hold
  yet, from ``format`` (``"#W{n:07d}"``): the same on every replay of the same calls.

Paths are keys separated by ``/``, each of which may compute (``users/{{ order.user_id }}``).
The reply is the tool's ``output:`` when it gives one, else the last step's result, shaped by
that step's ``output:`` (where ``value`` is the result). Values are JSON as
:mod:`envbuilder.tools._expr` describes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Annotated, Any

import orjson
from pydantic import Discriminator, Field, Tag

from envbuilder import deadlines
from envbuilder.errors import Loc, ToolError, format_loc
from envbuilder.plugins import ConfigModel
from envbuilder.spec import ParamName
from envbuilder.templating import TooBig, render_budget
from envbuilder.tools._expr import MAX_CALL_CHARS, Evaluation, Expr, Value, check_names
from envbuilder.world import json_copy

MISSING: Any = object()
#: Steps one call may run in all (``for_each`` bodies count once per element).
MAX_STEPS_RUN = 10_000
#: Seconds a call whose steps loop or search with an expression may take.
CALL_SECONDS = 2.0
_FORMAT = re.compile(r"^[^{}]*\{n(?::0?[1-9]?d)?\}[^{}]*$")


class _Step(ConfigModel):
    when: str | None = None
    """A condition: the step runs only when it holds (e.g. `method.source == 'gift_card'`)."""


class _Result(_Step):
    as_: ParamName | None = Field(default=None, alias="as")
    """A name for the step's result, which later steps and outputs read."""
    output: Any = None
    """What the step's result shows as the reply (last step only; `value` is the result), e.g.
    `"{{ value.status }}"`; default: the result as JSON (a string as it is)."""


class GetStep(_Result):
    """The value at a path."""

    get: str = Field(min_length=1)
    """The path, e.g. `orders/{order_id}`."""
    not_found: str = "{path} not found"
    """The error when the path does not exist (`{path}` is the path filled in)."""


class FindStep(_Result):
    """The key of the first item of a collection that matches (or of every match)."""

    find: str = Field(min_length=1)
    """The collection's path, e.g. `users`."""
    where: dict[str, Any] | None = None
    """Item fields (a `/`-path inside the item) and the values they must equal."""
    if_: str | None = Field(default=None, alias="if")
    """A condition on each item (`item`, its key `key`), e.g. `item_id in item.variants`."""
    all: bool = False
    """Every matching key, as a list (empty when none), instead of the first."""
    not_found: str = "{path} not found"
    """The error when nothing matches (without `all`)."""


class SetStep(_Result):
    """Put a value at a path (its parent must exist)."""

    set: str = Field(min_length=1)
    """The path, e.g. `orders/{order_id}/status`."""
    value: Any
    """The value (JSON; strings may compute)."""
    not_found: str = "{path} not found"
    """The error when the path's parent does not exist."""


class AppendStep(_Result):
    """Add a value to the list at a path."""

    append: str = Field(min_length=1)
    """The list's path, e.g. `orders/{order_id}/payment_history`."""
    value: Any
    """The value to add (JSON; strings may compute)."""
    not_found: str = "{path} not found"
    """The error when the path does not exist."""


class RemoveStep(_Result):
    """Delete the key (or list element) at a path."""

    remove: str = Field(min_length=1)
    """The path, e.g. `carts/{cart_id}`."""
    not_found: str = "{path} not found"
    """The error when the path does not exist."""


class IncrementStep(_Result):
    """Add a number to the number at a path."""

    increment: str = Field(min_length=1)
    """The number's path, e.g. `users/{user_id}/payment_methods/{method}/balance`."""
    by: Any = 1
    """The amount (negative to take off), e.g. `"{{ -payment.amount }}"`."""
    round: int | None = Field(default=None, ge=0, le=12)
    """Round the new value to this many decimals (money: 2)."""
    not_found: str = "{path} not found"
    """The error when the path does not exist."""


class RequireStep(_Step):
    """A precondition: the call fails with `error` unless it holds."""

    require: str = Field(min_length=1)
    """The condition, e.g. `order.status == 'pending'`."""
    error: str
    """What the agent reads when it does not hold (may compute)."""


class LetStep(_Step):
    """Names bound to computed values, in order."""

    let: dict[ParamName, Any] = Field(min_length=1)
    """Each name and its value (JSON; strings may compute), e.g. `{total: "{{ xs | sum }}"}`."""


class NewIdStep(_Result):
    """A key the collection at a path does not hold yet (deterministic: replays agree)."""

    new_id: str = Field(min_length=1)
    """The collection's path, e.g. `orders`."""
    format: str = "{n}"
    """The key with `{n}` for the number, e.g. `"#W{n:07d}"`."""
    start: int | None = Field(default=None, ge=0)
    """The first number tried (default: the collection's size + 1)."""

    def model_post_init(self, context: Any) -> None:
        if not _FORMAT.match(self.format):
            raise ValueError("`format` holds one `{n}` (or `{n:07d}`-style padding) and no other braces")


class ForEachStep(_Step):
    """Run `steps` once for each element of a list."""

    for_each: str = Field(min_length=1)
    """An expression giving the list, e.g. `order.payment_history`."""
    as_: ParamName = Field(alias="as")
    """The name each element is bound to."""
    steps: list[Step] = Field(min_length=1)
    """The steps run for each element."""
    max_items: int = Field(default=100, ge=1, le=1000)
    """The longest list allowed (a longer one fails the call)."""


KINDS = ("get", "find", "set", "append", "remove", "increment", "require", "let", "for_each", "new_id")


def _kind(value: Any) -> str | None:
    if isinstance(value, dict):
        named = [k for k in KINDS if k in value]
        return named[0] if len(named) == 1 else None  # none, or two kinds in one step
    return next((k for k in KINDS if k in type(value).model_fields), None)


Step = Annotated[
    Annotated[GetStep, Tag("get")]
    | Annotated[FindStep, Tag("find")]
    | Annotated[SetStep, Tag("set")]
    | Annotated[AppendStep, Tag("append")]
    | Annotated[RemoveStep, Tag("remove")]
    | Annotated[IncrementStep, Tag("increment")]
    | Annotated[RequireStep, Tag("require")]
    | Annotated[LetStep, Tag("let")]
    | Annotated[ForEachStep, Tag("for_each")]
    | Annotated[NewIdStep, Tag("new_id")],
    Discriminator(
        _kind,
        custom_error_type="step_kind",
        custom_error_message=f"a step names exactly one of: {', '.join(KINDS)}",
    ),
]
"""One step of a declarative tool, by the key that names its kind."""
ForEachStep.model_rebuild()
WRITES = (SetStep, AppendStep, RemoveStep, IncrementStep)


def _step(node: Any, key: str, read_only: bool) -> Any:
    if read_only and hasattr(node, "peek"):  # a collection: read its item without copying it
        return node.peek(key, MISSING)
    if isinstance(node, MutableMapping | dict):
        return node.get(key, MISSING)
    digits = key[1:] if key.startswith("-") else key
    if isinstance(node, list) and digits.isascii() and digits.isdigit() and len(digits) <= 18:
        i = int(key)  # (a key from a call's input: ASCII digits of a plausible length only)
        return node[i] if -len(node) <= i < len(node) else MISSING
    return MISSING


def resolve(root: Any, keys: list[str], *, read_only: bool = False) -> Any:
    """The value at ``keys`` below ``root`` (``MISSING`` when a step does not exist); with
    ``read_only`` the value may be the shared document's own: never change it."""
    node = root
    for key in keys:
        node = _step(node, key, read_only)
        if node is MISSING:
            break
    return node


class View(Mapping[str, Any]):
    """A collection as expressions read it: items are not copied (the sandbox cannot change
    them), and an item this call changed is read as changed."""

    def __init__(self, collection: Any):
        self._c = collection

    def __getitem__(self, key: str) -> Any:
        value = self._c.peek(key, MISSING)
        if value is MISSING:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._c)

    def __len__(self) -> int:
        return len(self._c)

    def __contains__(self, key: object) -> bool:
        return key in self._c


def _split(path: str) -> list[str]:
    """``a/{{ x / 2 }}/b`` -> ``['a', '{{ x / 2 }}', 'b']``: slashes inside ``{{ }}`` are not separators."""
    parts, current, depth, i = [], "", 0, 0
    while i < len(path):
        two = path[i : i + 2]
        if two in ("{{", "}}"):
            depth += 1 if two == "{{" else -1
            current += two
            i += 2
            continue
        if path[i] == "/" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += path[i]
        i += 1
    parts.append(current)
    return [p for p in parts if p != ""]


class _Path:
    def __init__(self, text: str, loc: Loc):
        self.parts = [Value(part, loc) for part in _split(text)]
        if not self.parts:
            raise ToolError(
                "the path is empty", hint="Give keys separated by `/`, e.g. `orders/{order_id}`", loc=loc
            )
        self.names = frozenset().union(*(p.names for p in self.parts))

    def keys(self, vs: Mapping[str, Any]) -> list[str]:
        return [_key(p(vs)) for p in self.parts]


def _key(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


class _Compiled:
    """One step, compiled: its paths, values and expressions."""

    def __init__(self, step: Any, loc: Loc, known: set[str], last: bool):
        self.step, self.loc = step, loc
        self.kind: str = _kind(step) or ""
        self.when = Expr(step.when, (*loc, "when")) if step.when else None
        if self.when is not None:
            check_names(self.when.names, known, (*loc, "when"))
        self.path: _Path | None = None
        self.values: dict[str, Value] = {}
        self.exprs: dict[str, Expr] = {}
        self.body: list[_Compiled] = []
        self.output: Value | None = None
        kind = self.kind
        if kind in ("get", "find", "set", "append", "remove", "increment", "new_id"):
            self.path = _Path(getattr(step, kind), (*loc, kind))
            check_names(self.path.names, known, (*loc, kind))
            self.not_found = Value(getattr(step, "not_found", "{path} not found"), (*loc, "not_found"))
            check_names(self.not_found.names, known | {"path"}, (*loc, "not_found"))
        if kind == "find":
            self.where = [
                (_Path(k, (*loc, "where", k)), Value(v, (*loc, "where", k)))
                for k, v in (step.where or {}).items()
            ]
            for p, v in self.where:
                check_names(p.names | v.names, known, (*loc, "where"))
            if step.if_ is not None:
                self.exprs["if"] = Expr(step.if_, (*loc, "if"))
                check_names(self.exprs["if"].names, known | {"item", "key"}, (*loc, "if"))
        for key in ("value", "by"):
            if key in type(step).model_fields:
                self.values[key] = Value(getattr(step, key), (*loc, key))
                check_names(self.values[key].names, known, (*loc, key))
        if kind == "require":
            self.exprs["require"] = Expr(step.require, (*loc, "require"))
            check_names(self.exprs["require"].names, known, (*loc, "require"))
            self.values["error"] = Value(step.error, (*loc, "error"))
            check_names(self.values["error"].names, known, (*loc, "error"))
        if kind == "let":
            for name, value in step.let.items():
                self.values[name] = Value(value, (*loc, "let", name))
                check_names(self.values[name].names, known, (*loc, "let", name))
                known.add(name)
        if kind == "for_each":
            self.exprs["for_each"] = Expr(step.for_each, (*loc, "for_each"))
            check_names(self.exprs["for_each"].names, known, (*loc, "for_each"))
            inner = known | {step.as_}
            self.body = _compile_all(step.steps, (*loc, "steps"), inner, nested=True)
        if isinstance(step, _Result):
            if step.as_:
                known.add(step.as_)
            if step.output is not None:
                if not last:
                    raise ToolError(
                        "this step's `output:` would never be shown: the reply is the last step's result",
                        hint="Shape the reply with the last step's `output:` or the tool's own `output:`",
                        loc=(*loc, "output"),
                    )
                self.output = Value(step.output, (*loc, "output"))
                check_names(self.output.names, known | {"value"}, (*loc, "output"))


def _compile_all(steps: list[Any], loc: Loc, known: set[str], *, nested: bool = False) -> list[_Compiled]:
    out = []
    for i, step in enumerate(steps):
        out.append(_Compiled(step, (*loc, i), known, last=not nested and i == len(steps) - 1))
    return out


def _walk(steps: Iterable[_Compiled]) -> Iterator[_Compiled]:
    for step in steps:
        yield step
        yield from _walk(step.body)


class Reply:
    """A step's result, and its text when it is not shown as JSON (a found key, a shaped string)."""

    __slots__ = ("text", "value")

    def __init__(self, value: Any, text: str | None = None):
        self.value, self.text = value, text


def reply_text(value: Any) -> str:
    """How a reply's value reads: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json_text(value)


def json_text(value: Any) -> str:
    if isinstance(value, Mapping) and not isinstance(value, dict):
        value = {k: value[k] for k in value}
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, default=str)


class Steps:
    """A declarative tool's steps, compiled once and run against a world document per call."""

    def __init__(self, steps: list[Any], inputs: Iterable[str], loc: Loc = ("steps",), output: Any = None):
        known = set(inputs)
        self.compiled = _compile_all(steps, loc, known)
        self.output: Value | None = None
        if output is not None:
            if self.compiled and self.compiled[-1].output is not None:
                raise ToolError(
                    "the tool's `output:` and its last step's `output:` both shape the reply",
                    hint="Keep one of them",
                    loc=("output",),
                )
            self.output = Value(output, ("output",))
            check_names(self.output.names, known | {"value"}, ("output",))
        every = list(_walk(self.compiled))
        self.writes = any(isinstance(s.step, WRITES) for s in every)
        """Whether a call may change the document (then what it reads is a copy it may change)."""
        self.loops = any(s.kind == "for_each" or "if" in s.exprs for s in every)

    def run(self, document: Any, variables: Mapping[str, Any]) -> str:
        """Run the steps on ``document`` (changed in place: drop its changes when this raises
        :class:`ToolError`) and return the reply's text."""
        vs = dict(variables)
        outer = getattr(render_budget, "left", None)
        if outer is None:
            render_budget.left = render_budget.limit = MAX_CALL_CHARS
        try:
            if self.loops:
                try:
                    with deadlines.deadline(CALL_SECONDS):
                        return self._run(document, vs)
                except deadlines.Overrun:
                    raise ToolError(f"the call took longer than {CALL_SECONDS:g} s and was stopped") from None
            return self._run(document, vs)
        except TooBig as exc:
            raise ToolError(f"the call was stopped: {exc}") from None
        finally:
            if outer is None:
                render_budget.left = None

    def _run(self, document: Any, vs: dict[str, Any]) -> str:
        last = _run_steps(self.compiled, document, vs, self.writes, [0])
        if self.output is not None:
            return reply_text(_eval(self.output, {**vs, "value": None if last is None else last.value}))
        if last is None:
            return "null"
        return last.text if last.text is not None else json_text(last.value)


def _eval(fn: Value | Expr, vs: Mapping[str, Any]) -> Any:
    try:
        return fn(vs)
    except Evaluation as exc:
        raise ToolError(f"{format_loc(fn.loc)}: {exc}") from None


def _run_steps(
    steps: list[_Compiled], doc: Any, vs: dict[str, Any], writes: bool, counter: list[int]
) -> Reply | None:
    last: Reply | None = None
    for st in steps:
        counter[0] += 1
        if counter[0] > MAX_STEPS_RUN:
            raise ToolError(f"the call ran more than {MAX_STEPS_RUN:,} steps and was stopped")
        if st.when is not None and not _eval(st.when, vs):
            continue
        result = _one(st, doc, vs, writes, counter)
        if result is None:
            continue
        as_ = getattr(st.step, "as_", None)
        if as_:
            vs[as_] = result.value
        if st.output is not None:
            shaped = _eval(st.output, {**vs, "value": result.value})
            result = Reply(shaped, shaped if isinstance(shaped, str) else None)
        last = result
    return last


def _missing(st: _Compiled, keys: list[str], vs: Mapping[str, Any]) -> ToolError:
    return ToolError(_key(_eval(st.not_found, {**vs, "path": "/".join(keys)})))


def _one(st: _Compiled, doc: Any, vs: dict[str, Any], writes: bool, counter: list[int]) -> Reply | None:
    kind = st.kind
    if kind == "require":
        if not _eval(st.exprs["require"], vs):
            raise ToolError(_key(_eval(st.values["error"], vs)))
        return None
    if kind == "let":
        for name, value in st.values.items():
            vs[name] = _eval(value, vs)
        return None
    if kind == "for_each":
        items = _eval(st.exprs["for_each"], vs)
        if isinstance(items, Mapping):
            items = list(items)
        if not isinstance(items, list | tuple):
            raise ToolError(f"{format_loc(st.loc)}: `for_each` needs a list, not {type(items).__name__}")
        if len(items) > st.step.max_items:
            raise ToolError(f"too many items ({len(items)}; at most {st.step.max_items})")
        for item in list(items):
            vs[st.step.as_] = item
            _run_steps(st.body, doc, vs, writes, counter)
        return None
    assert st.path is not None
    keys = st.path.keys(vs)
    if kind == "get":
        value = resolve(doc, keys, read_only=not writes)
        if value is MISSING:
            raise _missing(st, keys, vs)
        return Reply(View(value) if hasattr(value, "peek") else value)
    if kind == "find":
        found = _find(st, resolve(doc, keys, read_only=True), keys, vs)
        return Reply(found, None if st.step.all else str(found))
    if kind == "new_id":
        collection = resolve(doc, keys, read_only=True)
        if not isinstance(collection, Mapping):
            raise _missing(st, keys, vs)
        n = len(collection) + 1 if st.step.start is None else st.step.start
        for _ in range(len(collection) + 1):
            key = st.step.format.format(n=n)
            if key not in collection:
                return Reply(key)
            n += 1
        raise ToolError(f"{format_loc(st.loc)}: no free id")  # (cannot happen: more tries than keys)
    if kind == "append":
        target = resolve(doc, keys)
        if target is MISSING:
            raise _missing(st, keys, vs)
        if not isinstance(target, list):
            raise ToolError(f"{'/'.join(keys)} is not a list")
        target.append(json_copy(_eval(st.values["value"], vs)))
        return Reply(target)
    parent = resolve(doc, keys[:-1])
    key = keys[-1]
    if isinstance(parent, list):
        index = _step(parent, key, False)
        if index is MISSING and kind != "set":
            raise _missing(st, keys, vs)
    elif not isinstance(parent, MutableMapping | dict):
        raise _missing(st, keys, vs)
    if kind == "set":
        value = json_copy(_eval(st.values["value"], vs))
        if isinstance(parent, list):
            if _step(parent, key, False) is MISSING:
                raise _missing(st, keys, vs)
            parent[int(key)] = value
        else:
            parent[key] = value
        return Reply(value)
    if kind == "remove":
        if isinstance(parent, list):
            del parent[int(key)]
        elif key in parent:
            del parent[key]
        else:
            raise _missing(st, keys, vs)
        return Reply(None)
    # increment
    current = parent[int(key)] if isinstance(parent, list) else parent.get(key, MISSING)
    if current is MISSING:
        raise _missing(st, keys, vs)
    by = _eval(st.values["by"], vs)
    for name, number in (("/".join(keys), current), ("`by`", by)):
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise ToolError(f"{name} is not a number ({number!r})")
    new = current + by
    if st.step.round is not None:
        new = round(new, st.step.round)
    if isinstance(parent, list):
        parent[int(key)] = new
    else:
        parent[key] = new
    return Reply(new)


def _find(st: _Compiled, collection: Any, keys: list[str], vs: Mapping[str, Any]) -> Any:
    step: FindStep = st.step
    if isinstance(collection, list):
        pairs: Iterable[tuple[Any, Any]] = enumerate(collection)
    elif isinstance(collection, Mapping):
        peek = getattr(collection, "peek", collection.get)  # a search copies nothing
        pairs = ((k, peek(k)) for k in collection)
    else:
        if step.all:
            return []
        raise _missing(st, keys, vs)
    where = [(path.keys(vs), _eval(value, vs)) for path, value in st.where]
    test = st.exprs.get("if")
    scope = dict(vs)
    found = []
    for key, item in pairs:
        ok = True
        for path, want in where:
            node = item
            for part in path:  # plain dicts inside an item: walked inline (the hot loop)
                node = (
                    node.get(part, MISSING) if type(node) is dict else resolve(node, [part], read_only=True)
                )
                if node is MISSING:
                    break
            if node != want:
                ok = False
                break
        if ok and test is not None:
            scope["item"], scope["key"] = item, key
            ok = bool(_eval(test, scope))
        if ok:
            if not step.all:
                return key
            found.append(key)
    if step.all:
        return found
    raise _missing(st, keys, vs)
