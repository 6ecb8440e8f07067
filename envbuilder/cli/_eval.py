"""``envbuilder eval SPEC_OR_URL``: run a model on an environment's episodes and report its score."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from envbuilder.cli._output import fail_on_errors


def eval_command(
    target: Annotated[str, typer.Argument(metavar="SPEC_OR_URL",
                                          help="A spec file (run in-process) or an ORS server URL.")],
    model: Annotated[str, typer.Option(help="Model name sent to the endpoint.")],
    base_url: Annotated[str, typer.Option(help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1.")],
    api_key_env: Annotated[
        str, typer.Option(help="Environment variable holding the endpoint's API key (unset: no key).")
    ] = "OPENAI_API_KEY",
    split: Annotated[str | None, typer.Option(help="Split to run (default: test, else the first).")] = None,
    limit: Annotated[int | None, typer.Option(min=0, help="Run only the first N tasks.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes run at the same time.")] = 4,
    max_turns: Annotated[int, typer.Option(min=1, help="Model turns per episode.")] = 10,
    out: Annotated[
        Path | None, typer.Option(help="JSONL file of trajectories; a rerun resumes where it stopped.")
    ] = None,
    env: Annotated[str | None, typer.Option(help="Environment on the server (default: its first).")] = None,
) -> None:
    """Run a model on SPEC_OR_URL's tasks with its tools, and print accuracy, reward, turns, tokens."""
    with fail_on_errors():
        asyncio.run(_main(target, model, base_url, os.environ.get(api_key_env) or None, split, limit,
                          concurrency, max_turns, out, env))


async def _main(
    target: str, model_name: str, base_url: str, api_key: str | None, split: str | None,
    limit: int | None, concurrency: int, max_turns: int, out: Path | None, env_name: str | None,
) -> None:
    from rich.console import Console

    from envbuilder.eval import ChatModel, LocalBackend, RemoteBackend, plan_eval, run_eval
    from envbuilder.eval._backends import Backend

    console = Console()
    backend: Backend
    if target.startswith(("http://", "https://")):
        backend = await RemoteBackend.connect(target, env_name)
    else:
        from envbuilder.environment import load_environment

        backend = LocalBackend(load_environment(target))
    model = ChatModel(base_url, model_name, api_key=api_key)
    try:
        plan = await plan_eval(backend, split=split, limit=limit, out=out)
        skipped = len(plan.indices) - len(plan.todo)
        console.print(
            f"envbuilder: {plan.env}/{plan.split}: {len(plan.indices)} tasks"
            + (f", {skipped} already in {out}" if skipped else "")
        )
        progress, on_record = _progress(console, len(plan.todo))
        with progress or _Nothing():
            summary, _ = await run_eval(
                backend, model, plan, concurrency=concurrency, max_turns=max_turns, out=out,
                on_record=on_record,
            )
    finally:
        await model.aclose()
        await backend.aclose()
    console.print(_table(summary, model_name, plan.env, plan.split))


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _progress(console: Any, total: int) -> tuple[Any, Any]:
    """A progress bar on a terminal; nothing when output is piped."""
    if not console.is_terminal or total == 0:
        return None, None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    progress = Progress(TextColumn("episodes"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                        console=console, transient=True)
    bar = progress.add_task("episodes", total=total)
    return progress, lambda record: progress.advance(bar)


def _table(summary: Any, model: str, env: str, split: str) -> Any:
    """One metric a row: fits any terminal width."""
    from rich.table import Table

    table = Table(title=f"{model} on {env}/{split}", show_header=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    accuracy = (
        "-" if summary.accuracy is None else f"{summary.accuracy:.1%} ({summary.correct}/{summary.scored})"
    )
    reward = "-" if summary.mean_reward is None else f"{summary.mean_reward:.3f} ± {summary.stderr:.3f}"
    per = f" ({summary.turns / summary.tasks:.1f} per task)" if summary.tasks else ""
    for name, value in [
        ("tasks", str(summary.tasks)),
        ("accuracy", accuracy),
        ("mean reward ± s.e.", reward),
        ("ungradeable (reward null)", str(summary.ungradeable)),
        ("errors", str(summary.errors)),
        ("turns", f"{summary.turns}{per}"),
        ("tokens prompt / completion", f"{summary.prompt_tokens:,} / {summary.completion_tokens:,}"),
    ]:
        table.add_row(name, value)
    return table
