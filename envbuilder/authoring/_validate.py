"""Validate a spec completely: its schema, then everything only the data can tell."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from envbuilder.environment import Environment
from envbuilder.errors import EnvbuilderError, Problem, SpecError
from envbuilder.spec import load_spec_partially

__all__ = ["Validation", "validate_spec"]


@dataclass
class Validation:
    """The outcome of validating one spec file."""

    path: str
    problems: list[Problem] = field(default_factory=list)
    env: Environment | None = None
    """The compiled environment when the spec is valid."""

    @property
    def ok(self) -> bool:
        return not self.problems


def validate_spec(path: str | os.PathLike[str]) -> Validation:
    """Every problem of the spec at ``path``: schema errors, then data errors.

    Beyond the schema: the dataset opens, the splits exist and are not empty, templates parse
    and use only fields the tasks have, the grader's fields exist, the prompt and the grading
    target render for the first task of each split, and each ``tests:`` entry names a real task.
    A spec with schema errors still gets every data check its valid blocks allow.
    """
    result = Validation(str(path))
    loaded, result.problems = load_spec_partially(path)
    if loaded is None:
        return result
    partial = bool(result.problems)
    try:
        env = Environment(loaded)
    except SpecError as exc:
        result.problems += [p for p in exc.problems if p.code != "unchecked"]
        return result
    except EnvbuilderError as exc:
        if exc.code != "unchecked":
            result.problems.append(loaded.locate((), exc.message, code=exc.code, hint=exc.hint))
        return result
    except Exception:
        if partial:  # best effort on a spec already known to be invalid
            return result
        raise
    for loc, error in _data_checks(env):
        if error.code != "unchecked":
            result.problems.append(loaded.locate(loc, error.message, code=error.code, hint=error.hint))
    if not result.problems:
        result.env = env
    return result


Loc = tuple[str | int, ...]


def _data_checks(env: Environment) -> list[tuple[Loc, EnvbuilderError]]:
    """What Environment does not check because serving does not need it."""
    errors: list[tuple[Loc, EnvbuilderError]] = []
    for name, view in env.splits.items():
        if len(view) == 0:
            errors.append(
                (
                    ("splits", name),
                    EnvbuilderError(
                        f"split {name!r} has no tasks",
                        hint="Point it at a dataset split with rows, or remove it",
                        code="split_empty",
                    ),
                )
            )
            continue
        try:
            task = view.task(0)
        except EnvbuilderError as exc:
            errors.append((("dataset",), exc))
            continue
        try:
            env.messages(task)
        except EnvbuilderError as exc:
            errors.append((("prompt",), _in_task(exc, name)))
        try:
            if env.submit is not None:
                env.submit.turn_targets(task)
        except EnvbuilderError as exc:
            errors.append((("grader",), _in_task(exc, name)))
    try:
        tests = list(env.spec.tests)
    except EnvbuilderError:
        tests = []
    first = next(iter(env.splits), None)
    for i, test in enumerate(tests):
        split = test.split or first
        if split not in env.splits:
            if test.split is not None and test.split not in env.spec.splits:
                errors.append(
                    (
                        ("tests", i, "split"),
                        EnvbuilderError(
                            f"unknown split {test.split!r}",
                            hint=f"The splits are: {', '.join(env.spec.splits)}",
                            code="test_split",
                        ),
                    )
                )
            continue
        n = len(env.splits[split])
        if not -n <= test.index < n:
            errors.append(
                (
                    ("tests", i, "index"),
                    EnvbuilderError(
                        f"index {test.index} is out of range: split {split!r} has {n:,} tasks",
                        code="test_index",
                    ),
                )
            )
    return errors


def _in_task(exc: EnvbuilderError, split: str) -> EnvbuilderError:
    return EnvbuilderError(
        f"{exc.message} (rendering task 0 of split {split!r})", hint=exc.hint, code=exc.code
    )
