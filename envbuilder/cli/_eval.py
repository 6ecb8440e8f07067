"""``envbuilder eval SPEC_OR_URL``: run a model on an environment's episodes and report its score."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from envbuilder.cli._output import fail_on_errors
from envbuilder.errors import EnvbuilderError


@dataclass(frozen=True)
class _Options:
    target: str
    model: str
    base_url: str
    api_key: str | None
    split: str | None
    limit: int | None
    samples: int
    concurrency: int
    max_turns: int
    out: Path | None
    env: str | None
    group_by: str | None
    sampling: dict[str, Any]
    max_errors: int
    max_retries: int
    progress_every: float
    command: str


def eval_command(
    target: Annotated[
        str, typer.Argument(metavar="SPEC_OR_URL", help="A spec file (run in-process) or an ORS server URL.")
    ],
    model: Annotated[str, typer.Option(help="Model name sent to the endpoint.")],
    base_url: Annotated[str, typer.Option(help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1.")],
    api_key_env: Annotated[
        str, typer.Option(help="Environment variable holding the endpoint's API key (unset: no key).")
    ] = "OPENAI_API_KEY",
    split: Annotated[str | None, typer.Option(help="Split to run (default: test, else the first).")] = None,
    limit: Annotated[int | None, typer.Option(min=0, help="Run only the first N tasks.")] = None,
    samples: Annotated[int, typer.Option(min=1, help="Episodes per task (for pass@k).")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes run at the same time.")] = 4,
    max_turns: Annotated[int, typer.Option(min=1, help="Model turns per episode.")] = 10,
    out: Annotated[
        Path | None,
        typer.Option(help="JSONL file of the run; a rerun resumes it, a different run is refused."),
    ] = None,
    env: Annotated[str | None, typer.Option(help="Environment on the server (default: its first).")] = None,
    group_by: Annotated[
        str | None, typer.Option(help="Also score per value of this task field, e.g. subject.")
    ] = None,
    temperature: Annotated[float | None, typer.Option(min=0, help="Sampling temperature.")] = None,
    top_p: Annotated[float | None, typer.Option(min=0, max=1, help="Nucleus sampling mass.")] = None,
    max_tokens: Annotated[int | None, typer.Option(min=1, help="Cap on each reply's tokens.")] = None,
    seed: Annotated[int | None, typer.Option(help="Sampling seed, for endpoints that take one.")] = None,
    extra_body: Annotated[
        str | None,
        typer.Option(help='More request fields as a JSON object, e.g. \'{"reasoning_effort": "low"}\'.'),
    ] = None,
    max_errors: Annotated[
        int, typer.Option(min=0, help="Exit 1 when more episodes than this ended in an error.")
    ] = 0,
    max_retries: Annotated[
        int, typer.Option(min=0, max=20, help="Retries of a failed model request (429, 5xx, unreachable).")
    ] = 5,
    progress_every: Annotated[
        float, typer.Option(min=0.05, help="Seconds between progress lines when not on a terminal.")
    ] = 5.0,
) -> None:
    """Run a model on SPEC_OR_URL's tasks with its tools; print the score by outcome, with 95 % intervals."""
    with fail_on_errors():
        extra = _json_object(extra_body)
        sampling = {
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "seed": seed,
            "extra": extra,
        }
        options = _Options(
            target, model, base_url, os.environ.get(api_key_env) or None, split, limit, samples,
            concurrency, max_turns, out, env, group_by, sampling, max_errors, max_retries, progress_every,
            _command(target, model, base_url, api_key_env, split, limit, samples, max_turns, env,
                     sampling, out),
        )  # fmt: skip
        errors = asyncio.run(_main(options))
    if errors > max_errors:
        typer.echo(
            f"error: {errors} episode(s) ended in an error (--max-errors {max_errors}); "
            "rerun the same command to retry them",
            err=True,
        )
        raise typer.Exit(1)


def _json_object(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise EnvbuilderError(
            f"--extra-body is not JSON: {exc}", hint="Give an object, e.g. '{\"n\": 1}'"
        ) from None
    if not isinstance(value, dict):
        raise EnvbuilderError(f"--extra-body must be a JSON object, not {text!r}")
    return value


def _command(
    target: str,
    model: str,
    base_url: str,
    api_key_env: str,
    split: str | None,
    limit: int | None,
    samples: int,
    max_turns: int,
    env: str | None,
    sampling: dict[str, Any],
    out: Path | None,
) -> str:
    """The command that reproduces the run (every option that is part of its identity)."""
    args = ["envbuilder", "eval", target, "--model", model, "--base-url", base_url]
    if api_key_env != "OPENAI_API_KEY":
        args += ["--api-key-env", api_key_env]
    named = {
        "--env": env,
        "--split": split,
        "--limit": limit,
        "--samples": samples if samples > 1 else None,
        "--max-turns": max_turns,
        "--temperature": sampling["temperature"],
        "--top-p": sampling["top_p"],
        "--max-tokens": sampling["max_tokens"],
        "--seed": sampling["seed"],
        "--extra-body": json.dumps(sampling["extra"]) if sampling["extra"] else None,
        "--out": out,
    }
    for option, value in named.items():
        if value is not None:
            args += [option, str(value)]
    return shlex.join(args)


async def _main(o: _Options) -> int:
    """Run, print the summary; the number of episodes that ended in an error."""
    from rich.console import Console

    from envbuilder.cli._console import line
    from envbuilder.cli._eval_table import print_summary
    from envbuilder.eval import (
        ChatModel,
        LocalBackend,
        RemoteBackend,
        Sampling,
        plan_eval,
        run_eval,
        summarize,
    )
    from envbuilder.eval._backends import EvalBackend
    from envbuilder.eval._model import DEFAULT_RETRY
    from envbuilder.eval._progress import ProgressLines

    console = Console()
    backend: EvalBackend
    if o.target.startswith(("http://", "https://")):
        backend = await RemoteBackend.connect(o.target, o.env)
    else:
        from envbuilder.environment import load_environment

        backend = LocalBackend(load_environment(o.target))
    model = ChatModel(
        o.base_url, o.model, api_key=o.api_key, sampling=Sampling(**o.sampling),
        retry=dataclasses.replace(DEFAULT_RETRY, max_retries=o.max_retries),
    )  # fmt: skip
    try:
        plan = await plan_eval(
            backend,
            model,
            split=o.split,
            limit=o.limit,
            samples=o.samples,
            max_turns=o.max_turns,
            out=o.out,
            command=o.command,
        )
        kept = len(plan.episodes) - len(plan.todo)
        line(
            f"envbuilder: {plan.env}/{plan.split}: {len(plan.episodes)} episodes "
            f"({len(plan.episodes) // o.samples} tasks × {o.samples}), run {plan.identity.run_id}"
            + (f", {kept} already in {o.out}" if kept else "")
        )
        lines = ProgressLines(len(plan.todo), retries=lambda: (model.retries, model.last_retry_reason))
        if console.is_terminal:
            records = await _with_bar(console, backend, model, plan, o.concurrency, lines)
        else:

            def write(text: str) -> None:
                print(text, file=sys.stderr, flush=True)

            async with lines.every(o.progress_every, write):
                records = await run_eval(
                    backend, model, plan, concurrency=o.concurrency, on_record=lines.record
                )
    finally:
        await model.aclose()
        await backend.aclose()
    summary = summarize(records, group_by=o.group_by)
    print_summary(summary, f"{o.model} on {plan.env}/{plan.split}", o.group_by)
    if plan.results is not None:
        written = plan.results.write_summary(plan.results.header(), summary.to_dict(), o.group_by)
        line(f"envbuilder: summary in {written}; view with `envbuilder view {o.out}`")
    return summary.errors


async def _with_bar(console: Any, backend: Any, model: Any, plan: Any, concurrency: int, lines: Any) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from envbuilder.eval import run_eval

    progress = Progress(
        TextColumn("episodes"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[errors]} errors"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    bar = progress.add_task("episodes", total=len(plan.todo), errors=0)

    def on_record(record: dict[str, Any]) -> None:
        lines.record(record)
        progress.update(bar, advance=1, errors=lines.errors)

    with progress:
        return await run_eval(backend, model, plan, concurrency=concurrency, on_record=on_record)
