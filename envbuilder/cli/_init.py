"""``envbuilder init DATASET``: scaffold a commented spec from a dataset, guessing its columns."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli import _console
from envbuilder.cli._output import fail_on_errors


def init(
    dataset: Annotated[
        str,
        typer.Argument(
            help="A Parquet, JSON Lines, JSON or CSV file or folder, or a HuggingFace dataset (hub id or"
            " local folder)."
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write the spec here (default: print it).", dir_okay=False),
    ] = None,
    prompt_column: Annotated[
        str | None, typer.Option(help="The column holding the question (default: guessed).")
    ] = None,
    answer_column: Annotated[
        str | None, typer.Option(help="The column holding the answer (default: guessed).")
    ] = None,
    huggingface: Annotated[
        bool, typer.Option("--hf", help="Read DATASET through `datasets` (implied by an owner/name id).")
    ] = False,
    config: Annotated[
        str | None, typer.Option(help="The HuggingFace config (subset) name, e.g. main.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
) -> None:
    """Scaffold a commented spec for DATASET: its splits, prompt and answer columns, a grader.

    With --out, the spec is written and validated.
    """
    from envbuilder.authoring import scaffold_spec, validate_spec

    if out is not None and out.exists() and not force:
        raise typer.BadParameter(f"{out} exists (pass --force to overwrite it)", param_hint="--out")
    with fail_on_errors():
        scaffold = scaffold_spec(
            dataset,
            out=out,
            prompt_column=prompt_column,
            answer_column=answer_column,
            huggingface=huggingface,
            config=config,
        )
    if out is None:
        typer.echo(scaffold.text, nl=False)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(scaffold.text, encoding="utf-8")
    g = scaffold.guess
    prompt = f"prompt: the conversation in {g.prompt!r}" if g.conversation else f"prompt column {g.prompt!r}"
    _console.line(
        f"{out}: {prompt}, answer column {g.answer!r}, {g.describe()}, splits {', '.join(scaffold.splits)}"
        + (f", task id {g.id_column!r}" if g.id_column else "")
    )
    if g.free_text:
        _console.line(
            f"{out}: the answers in {g.answer!r} are long free text: consider a judge model"
            " (`grader: {type: llm_judge, ...}`) instead of exact_match",
            "yellow",
        )
    for column, rows, what in g.missing():
        kept = (
            "each split keeps only the rows that have one (`filter:`)"
            if column.isidentifier()
            else "a `filter:` cannot name this column: rename it in the data to drop those rows"
        )
        _console.line(
            f"{out}: {rows} of the first {g.sampled} rows have no {column!r} {what}; {kept}", "yellow"
        )
    with fail_on_errors():
        result = validate_spec(out)
    if not result.ok:
        _console.problems(result.problems)
        raise typer.Exit(1)
    assert result.env is not None
    _console.line(f"{out}: valid ({result.env.summary()} tasks); next: envbuilder preview {out}", "green")
