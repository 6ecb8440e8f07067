"""``envbuilder eval SPEC_OR_URL``: run a model on an environment's episodes and report its score."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from envbuilder.cli._endpoints import (
    JudgeBaseUrlOption,
    JudgeKeyEnvOption,
    JudgeModelOption,
    NoCacheOption,
    UserBaseUrlOption,
    UserKeyEnvOption,
    UserModelOption,
    apply_endpoint_flags,
    describe,
    endpoint_url,
    target_urls,
)
from envbuilder.cli._output import fail_on_errors
from envbuilder.cli._pull import TrustCodeOption, TrustedKeyOption
from envbuilder.errors import EnvbuilderError


@dataclass(frozen=True)
class _Options:
    targets: list[str]
    envs: list[str] | None
    answer: str
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
    timeout: float | None = None
    """Seconds a model request may wait (None: the model's default)."""
    api: str = "chat"
    max_cost: float | None = None
    price: str | None = None
    trust_code: bool = False
    trusted_key: Path | None = None
    flagged: frozenset[str] = frozenset()
    """The endpoint variables set by this command's flags (``--user-model`` …)."""


#: The environment variable that holds the key of each ``--api`` unless ``--api-key-env`` says.
_KEY_ENV = {"chat": "OPENAI_API_KEY", "responses": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def eval_command(
    targets: Annotated[
        list[str],
        typer.Argument(
            metavar="SPEC_OR_URL",
            help="Spec files or folders of specs (run in-process), ORS server URLs, or a published "
            "catalog's URL.",
            callback=target_urls,
        ),
    ],
    model: Annotated[str, typer.Option(help="Model name sent to the endpoint.")],
    base_url: Annotated[
        str,
        typer.Option(
            help="The model endpoint's base URL, e.g. http://localhost:8000/v1.", callback=endpoint_url
        ),
    ],
    api: Annotated[
        str,
        typer.Option(
            help="The endpoint's API: chat (OpenAI chat completions), responses (OpenAI Responses) "
            "or anthropic (Anthropic Messages)."
        ),
    ] = "chat",
    api_key_env: Annotated[
        str | None,
        typer.Option(
            help="Environment variable holding the endpoint's API key (default: OPENAI_API_KEY, "
            "ANTHROPIC_API_KEY for --api anthropic; unset: no key)."
        ),
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(min=0, help="Start no new episode once the tokens used cost this many USD."),
    ] = None,
    price: Annotated[
        str | None,
        typer.Option(
            help="USD per million prompt,completion tokens, e.g. 0.15,0.60 (default: the price table)."
        ),
    ] = None,
    split: Annotated[
        str | None,
        typer.Option(help="Split to run (default: a test split, else validation, else the first)."),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=0, help="Run only the first N tasks.")] = None,
    samples: Annotated[int, typer.Option(min=1, help="Episodes per task (for pass@k).")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes run at the same time.")] = 4,
    max_turns: Annotated[int, typer.Option(min=1, help="Model turns per episode.")] = 10,
    out: Annotated[
        Path | None,
        typer.Option(help="JSONL file of the run; a rerun resumes it, a different run is refused."),
    ] = None,
    env: Annotated[
        str | None, typer.Option(help="The environment to run on a server that serves several.")
    ] = None,
    envs: Annotated[
        str | None,
        typer.Option(help="Several environments, e.g. gsm8k,math500 (--out is then a folder)."),
    ] = None,
    answer: Annotated[
        str,
        typer.Option(
            help="How the model answers: tool (it calls the answer tool) or text (its final "
            "message is submitted to the environment's terminal tool)."
        ),
    ] = "tool",
    group_by: Annotated[
        str | None,
        typer.Option(help="Also score per value of this task field, e.g. subject (or meta.level)."),
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
        int,
        typer.Option(
            min=0,
            max=20,
            help="Retries of a failed model request (429, 5xx, unreachable); a timed-out one is "
            "retried once at most.",
        ),
    ] = 5,
    timeout: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            metavar="SECONDS",
            help="How long one model request may wait for the endpoint (to connect, for its answer) "
            "before it fails as a timeout (default: 300, for a reasoning model's long answer).",
        ),
    ] = None,
    progress_every: Annotated[
        float, typer.Option(min=0.05, help="Seconds between progress lines when not on a terminal.")
    ] = 5.0,
    trusted_key: TrustedKeyOption = None,
    trust_code: TrustCodeOption = False,
    user_base_url: UserBaseUrlOption = None,
    user_model: UserModelOption = None,
    user_api_key_env: UserKeyEnvOption = None,
    judge_base_url: JudgeBaseUrlOption = None,
    judge_model: JudgeModelOption = None,
    judge_api_key_env: JudgeKeyEnvOption = None,
    no_cache: NoCacheOption = False,
) -> None:
    """Run a model on one environment's tasks or several; print the score by outcome, with 95 % intervals."""
    from envbuilder.eval._answer import ANSWER_MODES
    from envbuilder.llm import model_class

    flagged = apply_endpoint_flags(
        user_base_url, user_model, user_api_key_env, judge_base_url, judge_model, judge_api_key_env, no_cache
    )
    with fail_on_errors():
        model_class(api)  # an unknown --api fails before anything runs
        key_env = api_key_env or _KEY_ENV[api]
        if answer not in ANSWER_MODES:
            raise EnvbuilderError(f"--answer {answer!r}: expected one of {', '.join(ANSWER_MODES)}")
        names = [n.strip() for n in envs.split(",") if n.strip()] if envs is not None else None
        extra = _json_object(extra_body)
        sampling = {
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "seed": seed,
            "extra": extra,
        }
        command = _command(targets, model, base_url, api, api_key_env, split, limit, samples, max_turns,
                           env, envs, answer, sampling, out)  # fmt: skip
        endpoints = {
            "--user-base-url": user_base_url, "--user-model": user_model,
            "--user-api-key-env": user_api_key_env, "--judge-base-url": judge_base_url,
            "--judge-model": judge_model, "--judge-api-key-env": judge_api_key_env,
        }  # fmt: skip
        for option, value in endpoints.items():  # part of the run's identity (never a key itself)
            command += f" {shlex.join([option, value])}" if value else ""
        command += " --no-cache" if no_cache else ""
        options = _Options(
            targets, names, answer, model, base_url, os.environ.get(key_env) or None, split, limit,
            samples, concurrency, max_turns, out, env, group_by, sampling, max_errors, max_retries,
            progress_every, command, timeout, api, max_cost, price, trust_code, trusted_key, flagged,
        )  # fmt: skip
        try:
            import asyncio  # here, not at the top: `envbuilder --help` builds every command

            errors = asyncio.run(_main(options))
        except KeyboardInterrupt:
            typer.echo(_interrupted(out, command), err=True)
            raise typer.Exit(130) from None
    if errors > max_errors:
        typer.echo(
            f"error: {errors} episode(s) ended in an error (--max-errors {max_errors}); "
            "rerun the same command to retry them",
            err=True,
        )
        raise typer.Exit(1)


def _interrupted(out: Path | None, command: str) -> str:
    """What Ctrl-C leaves behind and how to continue."""
    if out is None:
        return (
            "envbuilder: interrupted; nothing was saved (no --out). Add --out FILE to make a run resumable."
        )
    return (
        f"envbuilder: interrupted; the episodes that finished are saved in {out}. "
        f"Rerun the same command to resume:\n  {command}"
    )


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
    targets: list[str],
    model: str,
    base_url: str,
    api: str,
    api_key_env: str | None,
    split: str | None,
    limit: int | None,
    samples: int,
    max_turns: int,
    env: str | None,
    envs: str | None,
    answer: str,
    sampling: dict[str, Any],
    out: Path | None,
) -> str:
    """The command that reproduces the run (every option that is part of its identity)."""
    args = ["envbuilder", "eval", *targets, "--model", model, "--base-url", base_url]
    if api != "chat":
        args += ["--api", api]
    if api_key_env is not None:
        args += ["--api-key-env", api_key_env]
    named = {
        "--env": env,
        "--envs": envs,
        "--answer": answer if answer != "tool" else None,
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
    """Run every environment, print the summaries; the number of episodes that ended in an error."""
    from envbuilder.cli._console import line
    from envbuilder.cli._eval_table import print_suite
    from envbuilder.eval import Sampling
    from envbuilder.eval._suite import resolve_targets, write_suite
    from envbuilder.llm import DEFAULT_RETRY, PRICES_AS_OF, model_class, price_of

    targets = await resolve_targets(
        o.targets, o.envs, o.env, trust_code=o.trust_code, trusted_key=o.trusted_key
    )
    several = len(targets) > 1
    if several and o.out is not None and o.out.suffix in (".jsonl", ".json"):
        raise EnvbuilderError(
            f"--out {o.out}: a run of {len(targets)} environments writes one results file per "
            "environment into a folder",
            hint=f"Give a folder, e.g. --out {o.out.with_suffix('')}",
        )
    if several:
        line(f"envbuilder: {len(targets)} environments: {', '.join(t.name for t in targets)}")
    price = price_of(o.model, o.price)
    if o.max_cost is not None and price is None:
        raise EnvbuilderError(
            f"--max-cost: no price for model {o.model!r} in the price table",
            hint="Give its price with --price IN,OUT (USD per million prompt and completion tokens)",
        )
    model = model_class(o.api)(
        o.base_url, o.model, api_key=o.api_key, sampling=Sampling(**o.sampling),
        retry=dataclasses.replace(DEFAULT_RETRY, max_retries=o.max_retries),
        timeout=o.timeout,
    )  # fmt: skip

    def spent() -> float:
        return price.cost(model.usage.prompt_tokens, model.usage.completion_tokens) if price else 0.0

    def stop() -> bool:
        return o.max_cost is not None and spent() >= o.max_cost

    summaries, runs = {}, {}
    try:
        for target in targets:
            if stop():
                break
            out = o.out / f"{target.name}.jsonl" if several and o.out is not None else o.out
            summary, run = await _run_one(o, target, model, out, stop)
            summaries[target.name], runs[target.name] = summary, run
    finally:
        await model.aclose()
    if price is not None:
        usage = model.usage
        source = "--price" if o.price else f"list price as of {PRICES_AS_OF}"
        line(
            f"envbuilder: {usage.prompt_tokens:,} prompt + {usage.completion_tokens:,} completion "
            f"tokens cost ${spent():.4f} ({source})"
        )
    if stop():
        line(
            f"envbuilder: stopped: --max-cost ${o.max_cost:g} reached; episodes not started are left "
            "to do. Rerun with a higher --max-cost to continue"
            + ("" if o.out is not None else " (add --out to keep what ran)")
        )
    if several:
        print_suite(summaries, o.model)
        if o.out is not None:
            line(f"envbuilder: the run's table in {write_suite(o.out, runs, summaries)}")
    return sum(s.errors for s in summaries.values())


async def _run_one(
    o: _Options, target: Any, model: Any, out: Path | None, stop: Any
) -> tuple[Any, dict[str, Any]]:
    """Run one environment (resuming ``out``), print its summary; its summary and run record."""
    from rich.console import Console

    from envbuilder.cli._console import line
    from envbuilder.cli._eval_table import print_summary
    from envbuilder.eval import plan_eval, run_eval, summarize
    from envbuilder.eval._progress import ProgressLines

    console = Console()
    backend = await target.open()
    local = getattr(backend, "env", None)  # a spec run in this process: its model endpoints
    for text in describe([local] if local is not None else [], o.flagged):
        line(f"envbuilder: {text}")
    try:
        plan = await plan_eval(
            backend, model, split=o.split, limit=o.limit, samples=o.samples, max_turns=o.max_turns,
            out=out, command=o.command, answer=o.answer, group_by=o.group_by,  # type: ignore[arg-type]
        )  # fmt: skip
        kept = len(plan.episodes) - len(plan.todo)
        line(
            f"envbuilder: {plan.env}/{plan.split}: {len(plan.episodes)} episodes "
            f"({len(plan.episodes) // o.samples} tasks × {o.samples}), run {plan.identity.run_id}"
            + (f", {kept} already in {out}" if kept else "")
        )
        if o.split is None and plan.split_type == "train":
            line(
                f"envbuilder: note: {plan.split} is a train split ({plan.env} has no test or "
                "validation split): these are training-set figures"
            )
        if plan.answer_tool is not None:
            line(f"envbuilder: answers in text are submitted to {plan.answer_tool.describe()}")
        lines = ProgressLines(
            len(plan.todo), retries=lambda: (model.usage.retries, model.usage.last_retry_reason)
        )
        if console.is_terminal:
            records = await _with_bar(console, backend, model, plan, o.concurrency, lines, stop)
        else:

            def write(text: str) -> None:
                print(text, file=sys.stderr, flush=True)

            async with lines.every(o.progress_every, write):
                records = await run_eval(
                    backend, model, plan, concurrency=o.concurrency, on_record=lines.record, stop=stop
                )
    finally:
        await backend.aclose()
    summary = summarize(records, group_by=o.group_by)
    print_summary(summary, f"{o.model} on {plan.env}/{plan.split}", o.group_by)
    run: dict[str, Any] = {"run_id": plan.identity.run_id, "split": plan.split}
    if plan.results is not None:
        written = plan.results.write_summary(plan.results.header(), summary.to_dict(), o.group_by)
        run["results"] = plan.results.path.name
        line(f"envbuilder: summary in {written}; view with `envbuilder view {out}`")
    return summary, run


async def _with_bar(
    console: Any, backend: Any, model: Any, plan: Any, concurrency: int, lines: Any, stop: Any
) -> Any:
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
        return await run_eval(backend, model, plan, concurrency=concurrency, on_record=on_record, stop=stop)
