"""Validate a spec completely: its schema, then everything only the data can tell."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from envbuilder.authoring._leaks import duplicate_ids, gold_leaks
from envbuilder.environment import Environment
from envbuilder.errors import EnvbuilderError, Loc, Problem, SpecError, format_loc
from envbuilder.spec import LoadedSpec, load_spec_partially

__all__ = ["Validation", "validate_spec"]


@dataclass
class Validation:
    """The outcome of validating one spec file."""

    path: str
    problems: list[Problem] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Invalid keys (``grader``, ``splits.test.slice``) whose dependent checks did not run."""
    env: Environment | None = None
    """The compiled environment when the spec is valid."""

    @property
    def ok(self) -> bool:
        return not self.problems


def validate_spec(path: str | os.PathLike[str], *, trust_code: bool | None = None) -> Validation:
    """Every problem of the spec at ``path`` in one run, sorted by file and line.

    Beyond the schema: the dataset opens, the splits exist and are not empty, templates parse
    and use only fields the tasks have, the grader's fields exist, the prompt and the grading
    target render for the first task of each split, each ``tests:`` entry names a real task,
    task ids do not repeat, and no public field, prompt or hint gives the gold answer away
    (:mod:`envbuilder.authoring._leaks`).
    A spec with schema errors still gets every check its valid parts allow; the invalid keys
    whose dependent checks could not run are listed in :attr:`Validation.skipped`.

    ``trust_code``: whether the spec's own code may run to be checked (see
    :class:`~envbuilder.environment.Environment`); a part refused is reported, never imported.
    """
    result = Validation(str(path))
    partial_load = load_spec_partially(path)
    loaded, problems = partial_load.loaded, list(partial_load.problems)
    result.skipped = [format_loc(loc) for loc in partial_load.skipped]
    if loaded is not None:
        env = _environment(loaded, problems, partial=bool(problems), trust_code=trust_code)
        if env is not None:
            problems += env.problems
            checked = {p.loc[0] for p in problems if p.loc}  # a block with a problem: not rendered
            for loc, error in _data_checks(env, skip=checked):
                problems.append(loaded.locate(loc, error.message, code=error.code, hint=error.hint))
            if not problems:
                for loc, error in _integrity_checks(env):
                    problems.append(loaded.locate(loc, error.message, code=error.code, hint=error.hint))
            if not problems:
                result.env = env
    result.problems = _in_order([p for p in problems if p.code != "unchecked"], str(path))
    return result


def _environment(
    loaded: LoadedSpec, problems: list[Problem], *, partial: bool, trust_code: bool | None
) -> Environment | None:
    try:
        return Environment(loaded, strict=False, trust_code=trust_code)
    except SpecError as exc:  # located already (code it may not run)
        problems.extend(exc.problems)
    except EnvbuilderError as exc:
        problems.append(loaded.locate((), exc.message, code=exc.code, hint=exc.hint))
    except Exception:
        if not partial:
            raise
        # best effort on a spec already known to be invalid: its problems are reported
    return None


def _in_order(problems: list[Problem], path: str) -> list[Problem]:
    """Problems by file (the spec's own first, then the bases') and line; each once."""
    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=lambda p: (p.file != path, p.file or "", p.line or 0, p.col or 0))


def _data_checks(env: Environment, skip: set[str | int]) -> list[tuple[Loc, EnvbuilderError]]:
    """What Environment does not check because serving does not need it (the prompt and the
    grader are not rendered when ``skip`` holds them: their problems are already reported)."""
    errors: list[tuple[Loc, EnvbuilderError]] = []
    for name, view in env.splits.items():
        if len(view) == 0:
            errors.append(_empty_split(env, name, len(view.table)))
            continue
        try:
            task = view.task(0)
        except EnvbuilderError as exc:
            errors.append((("dataset",), exc))
            continue
        try:
            if env.prompter is not None and "prompt" not in skip:
                env.messages(task)
        except EnvbuilderError as exc:
            errors.append((("prompt",), _in_task(exc, name)))
        try:
            if env.submit is not None and "grader" not in skip:
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


def _integrity_checks(env: Environment) -> list[tuple[Loc, EnvbuilderError]]:
    """Repeated task ids and gold answers an agent can read."""
    errors: list[tuple[Loc, EnvbuilderError]] = []
    for dup in duplicate_ids(env):
        shown = "; ".join(f"{k!r} at rows {', '.join(map(str, v))}" for k, v in list(dup.ids.items())[:3])
        errors.append(
            (
                ("task", "id"),
                EnvbuilderError(
                    f"{dup.count:,} task ids repeat in split {dup.split!r} (of its first "
                    f"{dup.scanned:,} tasks): {shown}",
                    hint="Give `task: {id: …}` a column whose values are unique, or drop it for "
                    "`<split>-<row>` ids",
                    code="duplicate_task_id",
                ),
            )
        )
    for leak in gold_leaks(env):
        hint = {
            "task": "Make the field private (`task: {private: [...]}`) or exclude it",
            "prompt": "Take the answer out of the prompt template",
            "tools": "Reword the tool's template so that it does not give the answer away",
        }[str(leak.loc[0])]
        if leak.place == "task.id":
            hint = "Choose an id column that is not the answer"
        errors.append((leak.loc, EnvbuilderError(leak.describe(), hint=hint, code="gold_leak")))
    return errors


def _in_task(exc: EnvbuilderError, split: str) -> EnvbuilderError:
    return EnvbuilderError(
        f"{exc.message} (rendering task 0 of split {split!r})", hint=exc.hint, code=exc.code
    )


def _empty_split(env: Environment, name: str, rows: int) -> tuple[Loc, EnvbuilderError]:
    """Why split ``name`` has no tasks: its source has no rows, or which of its own settings
    (filter, slice, limit, profile, carving) left none of the source's ``rows``."""
    split = env.spec.splits[name]
    if rows == 0:
        source = split.files if split.files is not None else split.source or name
        what = "files" if split.files is not None else "source split"
        return ("splits", name), EnvbuilderError(
            f"split {name!r} has no tasks: its {what} {source!r} has no rows",
            hint="Point it at a dataset split with rows, or remove it",
            code="split_empty",
        )
    steps = [
        (key, f"`{key}: {value}`")
        for key, value in (
            ("profile", split.profile),
            ("filter", split.filter),
            ("slice", split.slice),
            ("limit", split.limit),
            ("carve_from", split.carve_from),
        )
        if value is not None
    ]
    if not steps:  # its rows were all carved out into other splits
        carved = ", ".join(repr(n) for n, s in env.spec.splits.items() if s.carve_from == name)
        steps = [("", f"carving out {carved}")]
    key = "filter" if split.filter is not None else steps[-1][0]
    settings = " then ".join(text for _, text in steps)
    noun = "row" if rows == 1 else "rows"
    return ("splits", name, *([key] if key else [])), EnvbuilderError(
        f"split {name!r} has no tasks: {settings} kept none of its {rows:,} {noun}",
        hint="Loosen the " + ("filter" if split.filter is not None else "setting") + ", or remove the split",
        code="split_empty",
    )
