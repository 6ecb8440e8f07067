"""YAML loading that remembers where every key and value came from (file, line, column)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from envbuilder.errors import Loc, Problem, SpecError


class _Loader(yaml.SafeLoader):
    """SafeLoader without the timestamp resolver: ``2024-01-01`` stays a string."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass
class Positions:
    """Maps a key path to the 1-based (line, column) where its value starts."""

    file: str
    marks: dict[Loc, tuple[int, int]] = field(default_factory=dict)
    key_marks: dict[Loc, tuple[int, int]] = field(default_factory=dict)
    """Where the key of a mapping entry starts (for unknown or duplicate keys)."""
    files: dict[Loc, str] = field(default_factory=dict)
    """The file holding a key when it is not ``file`` (a key inherited through ``extends:``)."""
    bases: list[Path] = field(default_factory=list)
    """The base specs merged in through ``extends:`` (resolved paths, nearest first)."""

    def lookup(self, loc: Loc, *, key: bool = False) -> tuple[int | None, int | None]:
        """The position of ``loc``'s value (of its key with ``key=True``), else of its
        nearest located ancestor."""
        _, line, col = self.where(loc, key=key)
        return line, col

    def where(self, loc: Loc, *, key: bool = False) -> tuple[str, int | None, int | None]:
        """Like :meth:`lookup`, with the file that holds the position."""
        loc = tuple(loc)
        if key and loc in self.key_marks:
            return (self.files.get(loc, self.file), *self.key_marks[loc])
        while True:
            if loc in self.marks:
                return (self.files.get(loc, self.file), *self.marks[loc])
            if not loc:
                return self.file, None, None
            loc = loc[:-1]

    def problem(
        self,
        loc: Loc,
        message: str,
        *,
        code: str,
        key: bool = False,
        value: Any = None,
        has_value: bool = False,
        hint: str | None = None,
    ) -> Problem:
        """A :class:`Problem` located at ``loc`` (at its key with ``key=True``)."""
        file, line, col = self.where(loc, key=key)
        return Problem(
            code=code,
            message=message,
            loc=tuple(loc),
            file=file,
            line=line,
            col=col,
            value=value,
            has_value=has_value,
            hint=hint,
        )


def load_yaml(text: str, file: str) -> tuple[Any, Positions]:
    """Parse ``text`` into plain Python data plus the positions of every node; any problem
    raises a :class:`SpecError`."""
    data, positions, problems = read_yaml(text, file)
    if problems:
        raise SpecError(problems)
    return data, positions


def read_yaml(text: str, file: str) -> tuple[Any, Positions, list[Problem]]:
    """Like :func:`load_yaml`, with the problems that leave the data readable (a duplicate key,
    whose first value is kept; an unknown tag, read as null) returned instead of raised, so
    they are reported beside the spec's other problems. Invalid YAML still raises."""
    positions = Positions(file)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        raise SpecError([_syntax_problem(exc, file)]) from None
    except RecursionError:
        raise SpecError([_too_deep(file)]) from None
    finally:
        loader.dispose()
    if node is None:
        return None, positions, []
    problems: list[Problem] = []
    try:
        data = _build(node, (), positions, loader, problems)
    except RecursionError:
        raise SpecError([_too_deep(file)]) from None
    return data, positions, problems


def _syntax_problem(exc: yaml.MarkedYAMLError, file: str) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    return Problem(
        code="yaml_syntax",
        message=f"invalid YAML: {exc.problem or exc.context}",
        file=file,
        line=mark.line + 1 if mark else None,
        col=mark.column + 1 if mark else None,
        hint="Check the indentation and quoting around this line",
    )


def _too_deep(file: str) -> Problem:
    return Problem(
        code="yaml_too_deep",
        message="the YAML nests too deep to read",
        file=file,
        line=1,
        hint="A spec nests a few levels of mappings and lists; look for runaway brackets",
    )


def _construct(node: yaml.Node, loader: _Loader, problems: list[Problem], file: str) -> Any:
    """The value of a scalar node (or of a key); a tag no loader knows (`!custom`) is a problem."""
    try:
        return loader.construct_object(node, deep=True)
    except yaml.MarkedYAMLError as exc:
        problem = _syntax_problem(exc, file)
        problems.append(replace(problem, hint="Remove the tag: a spec holds plain YAML values"))
        return None


def _build(node: yaml.Node, loc: Loc, pos: Positions, loader: _Loader, problems: list[Problem]) -> Any:
    pos.marks[loc] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _construct(key_node, loader, problems, pos.file)
            if not isinstance(key, str | int | float | bool) or key is None:
                key = str(key)
            if key in out:
                problems.append(
                    Problem(
                        code="duplicate_key",
                        message=f"duplicate key {key!r}",
                        loc=(*loc, key) if isinstance(key, str | int) else loc,
                        file=pos.file,
                        line=key_node.start_mark.line + 1,
                        col=key_node.start_mark.column + 1,
                        hint="Each key may appear once in a mapping; remove one of them",
                    )
                )
                continue  # the first value is kept, and checked
            child: Loc = (*loc, key) if isinstance(key, str | int) else (*loc, str(key))
            pos.key_marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            out[key] = _build(value_node, child, pos, loader, problems)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*loc, i), pos, loader, problems) for i, item in enumerate(node.value)]
    return _construct(node, loader, problems, pos.file)
