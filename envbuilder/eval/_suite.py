"""Many environments in one run: which environments a command names, and the run folder's summary.

``eval envs/ --envs gsm8k,math500``, ``eval a.yaml b.yaml``, ``eval URL --envs a,b`` (an ORS
server) and ``eval https://…/catalog.json --envs a,b`` (a published catalog: its packs are
pulled, verified and run in-process) each name several environments. Each is run as its own
run (its own identity and results file, ``FOLDER/<env>.jsonl``, resumed on its own), so
rerunning the command resumes the whole run;
``FOLDER/suite.json`` holds the table across them and the macro mean (every environment
weighs the same, whatever its number of tasks).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from envbuilder.errors import EnvbuilderError, did_you_mean
from envbuilder.eval._backends import EvalBackend, LocalBackend, RemoteBackend, pick_environment
from envbuilder.eval._results import Summary
from envbuilder.paths import write_file

__all__ = ["SUITE_FILE", "Target", "macro_mean", "resolve_targets", "write_suite"]

SUITE_FILE = "suite.json"


@dataclass(frozen=True)
class Target:
    """One environment of the run and how to reach it."""

    name: str
    open: Callable[[], Awaitable[EvalBackend]]


def _is_catalog(text: str) -> bool:
    """A published catalog or pack (pulled, then run in-process), not an ORS server."""
    lower = text.lower()
    remote = lower.startswith(("http://", "https://", "s3://", "gs://", "hf://"))
    return remote and (lower.endswith((".json", ".zip")) or not lower.startswith(("http://", "https://")))


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://")) and not _is_catalog(text)


def _spec_name(path: Path) -> str:
    """The ``name:`` a spec declares (read without compiling it), else its file name's stem."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        data = None
    name = data.get("name") if isinstance(data, dict) else None
    return str(name) if isinstance(name, str) and name else path.stem


def _local(path: Path, trust_code: bool) -> Callable[[], Awaitable[EvalBackend]]:
    async def open_() -> EvalBackend:
        from envbuilder.environment import load_environment

        return LocalBackend(load_environment(path, trust_code=True if trust_code else None))

    return open_


def _pack(path: Path, trust_code: bool) -> Callable[[], Awaitable[EvalBackend]]:
    async def open_() -> EvalBackend:
        from envbuilder.catalog import load_pack

        return LocalBackend(load_pack(path, trust_code=trust_code))

    return open_


def _remote(url: str, name: str) -> Callable[[], Awaitable[EvalBackend]]:
    async def open_() -> EvalBackend:
        return await RemoteBackend.connect(url, name)

    return open_


def _select(available: dict[str, Target], wanted: list[str] | None, where: str) -> list[Target]:
    if wanted is None:
        return list(available.values())
    wanted = [w.split("@", 1)[0] for w in wanted]  # a catalog's NAME@VERSION was pulled as NAME
    unknown = [w for w in wanted if w not in available]
    if unknown:
        first = unknown[0]
        close = did_you_mean(first, available)
        raise EnvbuilderError(
            f"--envs: {where} has no environment {', '.join(map(repr, unknown))}",
            hint=f"{close + ' ' if close else ''}Environments: {', '.join(available) or '(none)'}",
            code="unknown_env",
        )
    return [available[w] for w in dict.fromkeys(wanted)]


async def resolve_targets(
    targets: list[str],
    envs: list[str] | None,
    env: str | None,
    *,
    trust_code: bool = False,
    trusted_key: Path | None = None,
) -> list[Target]:
    """The environments ``targets`` (spec files, folders of specs, packs, ORS server URLs, a
    published catalog) name, narrowed to ``envs`` (``--envs``) or, on one URL, ``env`` (``--env``).

    Run in-process, a spec runs its own code (``function``, ``mcp``) only from the user's own
    folders, a pack only with ``trust_code`` or when its lock's signature verifies with
    ``trusted_key`` (see :class:`~envbuilder.environment.Environment`).

    Raises:
        EnvbuilderError: a path that does not exist, an unknown environment name (with "Did you
            mean …?"), a URL serving several environments when none was named, two environments
            of one name.
    """
    from envbuilder.catalog import TrustPolicy, find_specs, is_pack, pull
    from envbuilder.client import AsyncClient

    policy = TrustPolicy(trusted_key)

    if env is not None and envs is not None:
        raise EnvbuilderError("give --env or --envs, not both", code="invalid_option")
    available: dict[str, Target] = {}
    for target in targets:
        if _is_catalog(target):
            picked = envs if envs is not None else ([env] if env is not None else None)
            pulled = pull(target, envs=picked, trust=policy)
            found = {p.name: Target(p.name, _pack(p.pack, trust_code or p.signed)) for p in pulled}
        elif _is_url(target):
            async with AsyncClient(target) as client:
                names = await client.list_environments()
            if envs is None:
                names = [pick_environment(target, names, env)]
            found = {n: Target(n, _remote(target, n)) for n in names}
        else:
            path = Path(target)
            if not path.exists():
                raise EnvbuilderError(f"{target}: no such spec file or folder", code="not_found")
            found = {}
            for spec in find_specs([path]):
                if is_pack(spec):  # checked (and its signature, with a trusted key) before it runs
                    (pulled_pack,) = pull(str(spec), trust=policy)
                    name, opened = pulled_pack.name, _pack(spec, trust_code or pulled_pack.signed)
                else:
                    name, opened = _spec_name(spec), _local(spec, trust_code)
                if name in found:
                    raise EnvbuilderError(f"two specs in {target} are named {name!r}", code="duplicate_env")
                found[name] = Target(name, opened)
        for name, t in found.items():
            if name in available:
                raise EnvbuilderError(
                    f"two targets serve an environment named {name!r}", code="duplicate_env"
                )
            available[name] = t
    wanted = (
        envs if envs is not None else ([env] if env is not None and not any(map(_is_url, targets)) else None)
    )
    chosen = _select(available, wanted, " ".join(targets))
    if not chosen:
        raise EnvbuilderError(f"{' '.join(targets)} names no environment", code="not_found")
    return chosen


def macro_mean(summaries: dict[str, Summary]) -> float | None:
    """The mean over environments of each one's mean reward (all episodes): each weighs the same."""
    means = [s.reward_all.mean for s in summaries.values() if s.reward_all.mean is not None]
    return sum(means) / len(means) if means else None


def write_suite(folder: Path, runs: dict[str, dict[str, Any]], summaries: dict[str, Summary]) -> Path:
    """Write ``FOLDER/suite.json``: each environment's run id, results file and summary, and the
    macro mean; returns its path."""
    data = {
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "environments": {name: {**runs[name], "summary": summaries[name].to_dict()} for name in summaries},
        "macro_mean_reward_all": macro_mean(summaries),
    }
    return write_file(folder / SUITE_FILE, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
