"""Scaffold a commented spec from a dataset: guess its splits, prompt and answer columns, grader."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envbuilder.data import Row, sources
from envbuilder.errors import DataError

__all__ = ["Scaffold", "scaffold_spec"]

PROMPT_COLUMNS = ("question", "prompt", "problem", "input", "query", "instruction", "text", "content")
ANSWER_COLUMNS = (
    "answer", "final_answer", "solution", "label", "target", "output", "gold", "reference", "response",
    "completion", "correct_answer",
)  # fmt: skip
_SPLIT_WORDS = {
    "train": "train", "training": "train",
    "validation": "validation", "valid": "validation", "val": "validation", "dev": "validation",
    "test": "test", "testing": "test", "eval": "test",
}  # fmt: skip
_SPLIT_RE = re.compile(r"(?<![a-z])(" + "|".join(sorted(_SPLIT_WORDS, key=len, reverse=True)) + r")(?![a-z])")
_NUMBER = re.compile(r"^\s*[-+]?\$?\s*[\d,]*\.?\d+\s*%?\s*$")
SAMPLE_ROWS = 50


@dataclass
class Scaffold:
    """A scaffolded spec and the guesses behind it."""

    text: str
    name: str
    splits: list[str]
    prompt_column: str
    answer_column: str
    numeric: bool


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def scaffold_spec(
    dataset: str,
    *,
    out: Path | None = None,
    prompt_column: str | None = None,
    answer_column: str | None = None,
    huggingface: bool = False,
    config: str | None = None,
) -> Scaffold:
    """A commented spec for ``dataset``: a Parquet file or folder, or (``huggingface=True``, or
    an ``owner/name`` that is no local path) a HuggingFace hub id or hub-shaped local folder.

    Paths in the spec are relative to ``out`` (the file the spec will be written to; the
    current directory when None). Raises DataError when the data cannot be read or a column
    cannot be guessed.
    """
    root = Path(dataset).expanduser()
    spec_dir = (out.parent if out is not None else Path.cwd()).resolve()
    if huggingface or config is not None or (not root.exists() and _HUB_ID.match(dataset)):
        hub_path = _relpath(root, spec_dir) if root.exists() else dataset
        rows, columns, splits = _sample_hub(dataset if not root.exists() else str(root.resolve()), config)
        block = [
            "  type: huggingface",
            "  # A hub repo id, or a local folder laid out like one.",
            f"  path: {_q(hub_path)}",
        ]
        if config is not None:
            block.append(f"  config: {_q(config)}")
        name = _name(Path(dataset.rsplit("/", 1)[-1]) if not root.exists() else root)
        return _finish(name, block, splits, rows, columns, prompt_column, answer_column)
    if not root.exists():
        raise DataError(
            f"no file or folder at {dataset!r}",
            hint="Give a Parquet file or a folder of Parquet files, or a HuggingFace id (owner/name)",
            code="data_not_found",
        )
    paths = [root] if root.is_file() else sorted(root.rglob("*.parquet"))
    if not paths:
        raise DataError(f"no Parquet files in {dataset!r}", hint="Give a Parquet file or a folder of them")
    files = _group_splits(paths, root)
    first = next(iter(files))
    rows, columns = _sample(files[first])
    rel = {split: [_relpath(p, spec_dir) for p in split_paths] for split, split_paths in files.items()}
    block = [
        "  type: parquet",
        "  # Source split name -> Parquet file(s), relative to this spec.",
        "  files:",
    ]
    for split, split_paths in rel.items():
        if len(split_paths) == 1:
            block.append(f"    {split}: {_q(split_paths[0])}")
        else:
            block.append(f"    {split}:")
            block += [f"      - {_q(path)}" for path in split_paths]
    splits = {split: split for split in rel}
    return _finish(_name(root), block, splits, rows, columns, prompt_column, answer_column)


def _finish(
    name: str,
    dataset_block: list[str],
    splits: dict[str, str],
    rows: list[Row],
    columns: list[str],
    prompt_column: str | None,
    answer_column: str | None,
) -> Scaffold:
    prompt = prompt_column or _guess_prompt(rows, columns)
    answer = answer_column or _guess_answer(rows, columns, prompt)
    for given in (prompt, answer):
        if given not in columns:
            raise DataError(
                f"the data has no column {given!r}", hint=f"Its columns are: {', '.join(columns)}"
            )
    answers = [row.get(answer) for row in rows]
    gsm8k_style = bool(answers) and all(isinstance(a, str) and "####" in a for a in answers)
    numeric = gsm8k_style or (bool(answers) and all(_is_number(a) for a in answers))
    text = _render(name, dataset_block, splits, columns, prompt, answer, numeric, gsm8k_style)
    text += "".join(f"{line}\n" for line in conversation_hints(rows, columns))
    return Scaffold(text, name, list(splits), prompt, answer, numeric)


def conversation_hints(rows: list[Row], columns: list[str]) -> list[str]:
    """Commented suggestions for columns that hold conversations: a list of role/content turns
    (a `prompt.conversation`) or a list of several user turns (a `dialogue` that unfolds)."""
    lines: list[str] = []
    for column in columns:
        values: list[list[Any]] = [v for row in rows if isinstance(v := row.get(column), list)]
        if not values or len(values) < sum(row.get(column) is not None for row in rows) or not all(values):
            continue
        var = _var(column)
        if all(isinstance(t, dict) and "role" in t and "content" in t for v in values for t in v):
            lines += [
                "",
                f"# `{column}` holds role/content turns: to serve them as the conversation, replace",
                "# `prompt.template` with:",
                "#   conversation: {column: " + var + "}",
            ]
        elif (
            column not in ANSWER_COLUMNS  # reference answers per turn are not user turns
            and all(isinstance(t, str) for v in values for t in v)
            and any(len(v) > 1 for v in values)
        ):
            lines += [
                "",
                f"# `{column}` holds several user turns: to reveal them one at a time (the submit tool's",
                "# output is the next turn; the grader sees `turn`, `user_turns` and `replies`), use",
                f'#   prompt: {{template: "{{{{ {var}[0] }}}}"}}',
                f"#   dialogue: {{column: {var}, grade: each, reward: mean}}",
            ]
    return lines


def _sample_hub(path: str, config: str | None) -> tuple[list[Row], list[str], dict[str, str]]:
    """Rows and columns of the first split of a hub dataset, and ``{split: its type}``."""
    source_cls = sources.get("huggingface")
    cfg = source_cls.Config.model_validate({"type": "huggingface", "path": path, "config": config})
    source = source_cls(cfg, Path.cwd())
    names = source.split_names()
    if not names:
        raise DataError(f"the dataset {path!r} has no splits", code="data_empty")
    table = source.open(names[0])
    splits = {n: _SPLIT_WORDS.get(n.lower(), "test") for n in names}
    return table.rows(0, min(SAMPLE_ROWS, len(table))), list(table.columns), splits


def _group_splits(paths: list[Path], root: Path) -> dict[str, list[Path]]:
    groups: dict[str, list[Path]] = {}
    for path in paths:
        rel = str(path.relative_to(root)) if path != root else path.name
        found = _SPLIT_RE.findall(rel.lower())
        split = _SPLIT_WORDS[found[-1]] if found else "test"
        groups.setdefault(split, []).append(path)
    order = ["train", "validation", "test"]
    return {k: groups[k] for k in sorted(groups, key=order.index)}


def _sample(paths: list[Path]) -> tuple[list[Row], list[str]]:
    source_cls = sources.get("parquet")
    config = source_cls.Config.model_validate(
        {"type": "parquet", "files": {"s": [str(p.resolve()) for p in paths]}}
    )
    table = source_cls(config, Path("/")).open("s")
    return table.rows(0, min(SAMPLE_ROWS, len(table))), list(table.columns)


def _string_columns(rows: list[Row], columns: list[str]) -> list[str]:
    return [c for c in columns if rows and all(isinstance(r.get(c), str) for r in rows)]


def _named(columns: list[str], names: tuple[str, ...], exclude: str | None = None) -> str | None:
    by_lower = {c.lower(): c for c in columns if c != exclude}
    return next((by_lower[n] for n in names if n in by_lower), None)


def _guess_prompt(rows: list[Row], columns: list[str]) -> str:
    strings = _string_columns(rows, columns)
    found = _named(strings, PROMPT_COLUMNS)
    if found:
        return found
    if not strings:
        raise DataError(
            "no text column to use as the prompt",
            hint=f"Its columns are: {', '.join(columns)}; pass --prompt-column",
            code="scaffold_no_prompt",
        )
    return max(strings, key=lambda c: sum(len(r[c]) for r in rows))


def _guess_answer(rows: list[Row], columns: list[str], prompt: str) -> str:
    found = _named(columns, ANSWER_COLUMNS, exclude=prompt)
    if found:
        return found
    raise DataError(
        "cannot tell which column holds the answer",
        hint=f"Its columns are: {', '.join(columns)}; pass --answer-column",
        code="scaffold_no_answer",
    )


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int | float) or (isinstance(value, str) and bool(_NUMBER.match(value)))


def _name(root: Path) -> str:
    stem = root.stem if root.is_file() else root.name
    if root.is_file() and _SPLIT_RE.search(stem.lower()):
        stem = root.parent.name
    name = re.sub(r"[^a-z0-9_-]+", "-", stem.lower()).strip("-_")
    return name or "my-env"


def _relpath(path: Path, start: Path) -> str:
    try:
        return Path(os.path.relpath(path.resolve(), start)).as_posix()
    except ValueError:  # another drive on Windows
        return path.resolve().as_posix()


def _q(value: str) -> str:
    """A YAML scalar: plain when safe, else double-quoted (JSON strings are valid YAML)."""
    return value if re.fullmatch(r"[A-Za-z0-9_./-]+", value) else json.dumps(value)


def _var(column: str) -> str:
    return re.sub(r"\W+", "_", column).strip("_").lower() or "field"


def _render(
    name: str,
    dataset_block: list[str],
    splits: dict[str, str],
    columns: list[str],
    prompt: str,
    answer: str,
    numeric: bool,
    gsm8k_style: bool,
) -> str:
    rename = {c: _var(c) for c in (prompt, answer) if not c.isidentifier()}
    p, a = rename.get(prompt, prompt), rename.get(answer, answer)
    lines = [
        f"# {name}: scaffolded by `envbuilder init`. Check it with:",
        "#   envbuilder validate SPEC && envbuilder preview SPEC && envbuilder check SPEC",
        "# Editor completion: `envbuilder schema > envbuilder.schema.json`, then start this file with",
        "#   # yaml-language-server: $schema=envbuilder.schema.json",
        "",
        "# The environment's name in URLs: lowercase letters, digits, `-`, `_`.",
        f"name: {name}",
        f"title: {_q(name)}",
        "# What the environment tests (shown in catalogs).",
        f"description: {_q(f'Answer the `{prompt}` column; graded by exact match with `{answer}`.')}",
        "",
        f"# Where the rows come from. Columns: {', '.join(columns)}.",
        "dataset:",
        *dataset_block,
    ]
    lines += ["", "# The splits served, and what each is for (train, validation or test).", "splits:"]
    lines += [f"  {_q(split)}: {{type: {kind}}}" for split, kind in splits.items()]
    if rename:
        lines += [
            "",
            "# Column names that are not valid template variables, renamed.",
            "task:",
            "  rename:",
            *[f"    {_q(old)}: {new}" for old, new in rename.items()],
        ]
    ask = "your final answer as a number" if numeric else "your final answer"
    lines += [
        "",
        f"# The prompt: a Jinja template over the task's fields (the prompt column is `{prompt}`).",
        "prompt:",
        "  template: |-",
        f"    {{{{ {p} }}}}",
        "",
        f"    When you are done, call the `submit` tool with {ask}.",
        "",
        "# The tool the agent answers with.",
        "submit:",
        f"  description: Submit {ask}.",
        "",
        f"# How an answer is graded against the answer column `{answer}`.",
        "grader:",
        "  type: exact_match",
    ]
    if gsm8k_style:
        lines += [
            '  # The reference ends with "#### <number>"; the number after it is the target.',
            f"  target: \"{{{{ {a}.split('####')[-1] }}}}\"",
            '  # Compare the final number of the response ("The answer is $1,000" -> 1000).',
            "  extract: number",
        ]
    elif numeric:
        lines += [
            "  # The answers are numbers: the target is the answer column.",
            f'  target: "{{{{ {a} }}}}"',
            '  # Compare the final number of the response ("The answer is $1,000" -> 1000).',
            "  extract: number",
        ]
    else:
        lines += [
            "  # The whole response must equal the answer column (after trimming whitespace).",
            f'  target: "{{{{ {a} }}}}"',
        ]
    lines += [
        "",
        "# Responses with the reward each must get (`envbuilder check` runs them).",
        "# tests:",
        '#   - {response: "The answer is 42.", reward: 1, split: test, index: 0}',
    ]
    return "\n".join(lines) + "\n"
