"""Pydantic's validation errors rewritten for spec authors: located, saying what was expected.

Pydantic words errors for Python programmers ("Input should be a valid dictionary or instance
of ExtractSpec") and reports one error per member of a union. Here each error is located in
the YAML, the union members' errors at one key merge into one "expected A, B or C", and a hint
is added: the closest allowed value ("Did you mean 'train'?") or the key's own description.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from envbuilder.errors import Loc, Problem, did_you_mean, format_loc
from envbuilder.spec._yaml import Positions

__all__ = ["misspelled_keys", "spec_problems"]

_QUOTED = re.compile(r"'([^']*)'")
KEY_CUTOFF = 0.7
"""How alike an unknown key and a known one must be for "Did you mean …?" (difflib's ratio):
`promt` → `prompt` is 0.91, `nmae` → `name` 0.75; `target` → `dataset` (0.62) is no typo."""

_EXPECTED = {
    "string_type": "a string",
    "str_type": "a string",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "dict_type": "a mapping of keys to values",
    "model_type": "a mapping of keys to values",
    "model_attributes_type": "a mapping of keys to values",
    "none_required": "null",
}


def spec_problems(
    exc: ValidationError, positions: Positions, data: Any, *, keep_missing: bool = False
) -> list[Problem]:
    """One located :class:`Problem` per error (errors of one union at one key merged); a
    required key that is missing because it is misspelled is left out unless ``keep_missing``."""
    groups: dict[Loc, list[Any]] = {}
    members: dict[Loc, bool] = {}
    for err in exc.errors():
        loc, in_union = _strip_tags(tuple(err["loc"]), data, missing=err["type"] == "missing")
        groups.setdefault(loc, []).append(err)
        members[loc] = members.get(loc, False) or in_union
    # A mapping given to a union of scalar-or-mapping: errors inside the mapping are the ones
    # that matter, not "expected a string" from the scalar members.
    nested = {loc[:n] for loc in groups for n in range(len(loc))}
    problems: list[Problem] = []
    for loc, errs in groups.items():
        if members[loc] and loc in nested:
            continue
        if members[loc] and len(errs) > 1:
            problems.append(_union_problem(loc, errs, positions))
        else:
            problems.extend(_problem(loc, err, positions, data) for err in errs)
    # A misspelled required key is one mistake: "unknown key 'promt' Did you mean 'prompt'?"
    # says it all, so its "missing required key 'prompt'" is left out.
    fixed = set() if keep_missing else set(misspelled_keys(problems).values())
    return [p for p in problems if not (p.code == "missing" and p.loc in fixed)]


def misspelled_keys(problems: Sequence[Problem]) -> dict[Loc, Loc]:
    """``{loc of an unknown key: loc of the missing key it is a misspelling of}``."""
    missing = {p.loc for p in problems if p.code == "missing"}
    out: dict[Loc, Loc] = {}
    for p in problems:
        if p.code != "extra_forbidden" or not p.hint or not p.loc:
            continue
        meant = _QUOTED.findall(p.hint)
        if meant and (*p.loc[:-1], meant[0]) in missing:
            out[p.loc] = (*p.loc[:-1], meant[0])
    return out


def _union_problem(loc: Loc, errs: Sequence[dict[str, Any]], positions: Positions) -> Problem:
    phrases: list[str] = []
    choices: list[str] = []
    for err in errs:
        if err["type"] == "literal_error":
            options = _QUOTED.findall(str((err.get("ctx") or {}).get("expected", "")))
            choices += options
            new = [repr(o) for o in options]
        else:
            phrase = _expected(err)
            new = [phrase] if phrase else []
        phrases += [p for p in new if p not in phrases]
    value = errs[0].get("input")
    hint = did_you_mean(value, choices) if isinstance(value, str) and choices else None
    file, line, col = positions.where(loc)
    return Problem(
        code="union_mismatch",
        message=f"expected {_either(phrases)}",
        loc=loc,
        file=file,
        line=line,
        col=col,
        value=value,
        has_value=True,
        hint=hint,
    )


def _either(phrases: Sequence[str]) -> str:
    return phrases[0] if len(phrases) == 1 else f"{', '.join(phrases[:-1])} or {phrases[-1]}"


def _expected(err: dict[str, Any]) -> str | None:
    """What the value should have been, in a spec author's words."""
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind in _EXPECTED:
        return _EXPECTED[kind]
    if kind == "literal_error":
        options = _QUOTED.findall(str(ctx.get("expected", "")))
        return f"one of {', '.join(repr(o) for o in options)}" if len(options) > 1 else ctx.get("expected")
    if kind == "string_pattern_mismatch":
        return f"text matching the pattern {ctx.get('pattern')}"
    if kind == "too_short":
        n = ctx.get("min_length")
        return f"at least {n} {'entry' if n == 1 else 'entries'}"
    if kind == "too_long":
        n = ctx.get("max_length")
        return f"at most {n} {'entry' if n == 1 else 'entries'}"
    if kind == "string_too_short":
        return f"at least {ctx.get('min_length')} characters"
    for op, words in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if op in ctx:
            return f"a number {words} {ctx[op]}"
    return None


def _problem(loc: Loc, err: dict[str, Any], positions: Positions, data: Any) -> Problem:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    message = err["msg"]
    value = err.get("input")
    has_value = kind != "missing"
    hint = None
    expected = _expected(err)
    if kind == "union_tag_invalid":
        choices = _QUOTED.findall(str(ctx.get("expected_tags", "")))
        tag = str(ctx.get("tag"))
        message = f"unknown type {tag!r}"
        hint = did_you_mean(tag, choices) or f"Known types: {', '.join(choices)}"
        loc = (*loc, "type")
        value, has_value = None, False
    elif kind == "union_tag_not_found":
        message = "a `type:` key is required here"
        has_value = False
    elif kind == "extra_forbidden":
        message = f"unknown key {loc[-1]!r}"
        # Where it belongs when the spec has a block that takes it, else a close spelling,
        # else a top-level block the spec lacks that takes it.
        known = _known_keys(loc[:-1], data)
        hint = (
            _misplaced(loc, data, present=True)
            or (did_you_mean(str(loc[-1]), known, cutoff=KEY_CUTOFF) if known else None)
            or _misplaced(loc, data, present=False)
        )
        has_value = False
    elif kind == "missing":
        message = f"missing required key {loc[-1]!r}" if loc else "missing required key"
        hint = _description(loc, data)
    elif message.startswith("Value error, "):
        message = message[len("Value error, ") :]
        has_value = False
    elif expected is not None:
        message = f"expected {expected}"
        if kind == "literal_error" and isinstance(value, str):
            hint = did_you_mean(value, _QUOTED.findall(str(ctx.get("expected", ""))))
        elif kind == "string_pattern_mismatch":
            hint = _description(loc, data)
    return positions.problem(
        loc,
        message,
        code=kind,
        value=value,
        has_value=has_value,
        hint=hint,
        key=kind in ("extra_forbidden", "union_tag_invalid"),
    )


def _strip_tags(loc: tuple[Any, ...], data: Any, *, missing: bool = False) -> tuple[Loc, bool]:
    """Drop the tags pydantic puts in locations, and say whether one was a union member's.

    ``dataset.parquet.files`` → ``dataset.files`` (the tag of a plugin block), and
    ``grader.extract.literal['number','none']`` → ``grader.extract`` (a union member).
    """
    out: list[Any] = []
    node = data
    in_union = False
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if (
            isinstance(node, dict)
            and node.get("type") == part
            and (part not in node or (not last and not isinstance(node[part], dict | list)))
        ):
            continue  # the tag of a plugin block (also when a key has the type's name)
        if isinstance(part, str) and (
            (out and not isinstance(node, dict | list))  # a scalar has no keys: a member tag
            or (isinstance(node, list))
            or (isinstance(node, dict) and part not in node and not (last and missing))
        ):
            in_union = True
            continue
        out.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(out), in_union


def _known_keys(loc: Loc, data: Any) -> list[str]:
    from envbuilder.spec._schema import keys_at

    return keys_at(loc, data)


def _misplaced(loc: Loc, data: Any, *, present: bool) -> str | None:
    """Where an unknown key belongs when it is a key of another block (indented at the wrong
    level): "`target` is a key of `grader` (indent it under grader)"; a block of the spec
    (``present``) or a top-level block it does not have."""
    from envbuilder.spec._schema import blocks_with, homes_of

    key = loc[-1]
    if not isinstance(key, str):
        return None
    homes = (homes_of(key, loc, data) if present else blocks_with(key, data))[:3]
    if not homes:
        return None
    where = " or ".join(f"`{format_loc(home)}`" for home in homes)
    how = "indent it under" if len(homes[0]) >= len(loc) else "move it under"
    return f"`{key}` is a key of {where} ({how} {format_loc(homes[0])})"


def _description(loc: Loc, data: Any) -> str | None:
    from envbuilder.spec._schema import description_at

    text = description_at(loc, data)
    return " ".join(text.split()) if text else None
