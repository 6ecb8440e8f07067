"""``envbuilder profile SPEC``: how hard each task is for a model (pass rate, reward, tokens)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli._endpoints import endpoint_url
from envbuilder.cli._output import fail_on_errors
from envbuilder.cli._pull import TrustCodeOption


def profile(
    spec: Annotated[Path, typer.Argument(help="The spec file (run in-process).")],
    model: Annotated[str, typer.Option(help="Model name sent to the endpoint.")],
    base_url: Annotated[
        str,
        typer.Option(
            help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1.", callback=endpoint_url
        ),
    ],
    samples: Annotated[int, typer.Option(min=1, help="Episodes per task.")] = 8,
    split: Annotated[
        str | None,
        typer.Option(help="Split to profile (default: a test split, else validation, else the first)."),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=0, help="Profile only the first N tasks.")] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="JSONL results of the run (a rerun resumes it); the per-task table goes beside it as "
            "NAME.tasks.jsonl. Default: profiles/ENV-SPLIT.jsonl beside the spec."
        ),
    ] = None,
    api_key_env: Annotated[
        str, typer.Option(help="Environment variable holding the endpoint's API key (unset: no key).")
    ] = "OPENAI_API_KEY",
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes run at the same time.")] = 4,
    max_turns: Annotated[int, typer.Option(min=1, help="Model turns per episode.")] = 10,
    temperature: Annotated[float | None, typer.Option(min=0, help="Sampling temperature.")] = 1.0,
    timeout: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            metavar="SECONDS",
            help="How long one model request may wait for the endpoint before it fails as a timeout "
            "(default: 300).",
        ),
    ] = None,
    trust_code: TrustCodeOption = False,
) -> None:
    """Run a model SAMPLES times per task of a split; write each task's pass rate, mean reward and tokens.

    The table goes beside the results (NAME.tasks.jsonl). A split selects tasks by it with
    `profile: TABLE` and a filter such as `filter: "pass_rate > 0 and pass_rate < 1"`; a rerun
    resumes the run."""
    from envbuilder.data import histogram
    from envbuilder.environment import load_environment
    from envbuilder.eval import ChatModel, Sampling, profile_split

    with fail_on_errors():
        env = load_environment(spec, trust_code=True if trust_code else None)
        chosen = split or env.evaluation_split()
        env.split(chosen)  # an unknown split fails before any model call
        results = out or spec.parent / "profiles" / f"{env.name}-{chosen}.jsonl"
        results.parent.mkdir(parents=True, exist_ok=True)
        chat = ChatModel(
            base_url,
            model,
            api_key=os.environ.get(api_key_env) or None,
            sampling=Sampling(temperature=temperature),
            timeout=timeout,
        )
        command = shlex.join(
            ["envbuilder", "profile", str(spec), "--model", model, "--base-url", base_url,
             "--samples", str(samples), "--split", chosen, "--out", str(results)]
            + (["--limit", str(limit)] if limit is not None else [])
        )  # fmt: skip

        async def run() -> tuple[Path, list[dict[str, object]]]:
            try:
                return await profile_split(
                    env, chat, split=chosen, samples=samples, out=results, limit=limit,
                    max_turns=max_turns, concurrency=concurrency, command=command,
                )  # fmt: skip
            finally:
                await chat.aclose()
                await env.aclose()

        import asyncio  # here: `envbuilder --help` builds every command

        table, rows = asyncio.run(run())
    bins = histogram(rows)
    typer.echo(f"envbuilder: {len(rows)} tasks of {env.name}/{chosen} profiled ({samples} samples each)")
    typer.echo("pass rate  " + " ".join(f"{b / 10:.1f}" if b < 10 else "1.0" for b in range(11)))
    typer.echo("tasks      " + " ".join(f"{n:>3}" for n in bins))
    typer.echo(f"envbuilder: per-task table in {table}; results in {results}")
