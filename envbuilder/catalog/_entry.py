"""A catalog entry: what a person choosing an environment wants to know, built from the Environment API."""

from __future__ import annotations

import re
from typing import Any

from envbuilder._version import __version__
from envbuilder.catalog._audit import audit_summary
from envbuilder.catalog._files import content_hash, file_sha256
from envbuilder.data import histogram, read_profile
from envbuilder.environment import Environment
from envbuilder.errors import EnvbuilderError
from envbuilder.graders import fidelity_of

__all__ = ["build_catalog", "catalog_entry"]

#: Config keys whose values are never published (a judge's API key, a token, …).
_SECRET_KEY = re.compile(r"secret|password|token|api_?key|credential", re.I)


def catalog_entry(env: Environment) -> dict[str, Any]:
    """The catalog entry of ``env`` (JSON-ready)."""
    spec = env.spec
    files = env.files
    digests = {name: file_sha256(path) for name, path in files.items()}
    return {
        "name": env.name,
        "title": spec.title or env.name,
        "description": spec.description or "",
        "tags": list(spec.tags),
        "license": spec.license,
        "citation": spec.citation,
        "version": spec.version,
        "spec": env.loaded.path.name if env.loaded.path is not None else None,
        "content_hash": content_hash(digests),
        "files": [
            {"path": name, "sha256": digests[name], "bytes": files[name].stat().st_size} for name in files
        ],
        "dataset": _redact(env.source.describe()),
        "splits": [
            {"name": view.name, "type": view.type, "num_tasks": len(view), **_profile(env, view.name)}
            for view in env.splits.values()
        ],
        "tools": [tool.model_dump(mode="json") for tool in env.tools_listing.tools],
        "graders": [_redact(spec.grader.model_dump(mode="json"))],
        "hacks_audit": audit_summary(env),
        "fidelity": fidelity_of(spec.grader),
        "sample": _sample(env),
    }


def build_catalog(envs: list[Environment]) -> dict[str, Any]:
    """The catalog of ``envs`` in the given order: ``{"envbuilder": version, "environments": [...]}``."""
    return {"envbuilder": __version__, "environments": [catalog_entry(env) for env in envs]}


def _profile(env: Environment, split: str) -> dict[str, Any]:
    """The pass-rate distribution of a split made from a difficulty profile (`profile:`), if any."""
    name = env.spec.splits[split].profile
    if name is None:
        return {}
    view = env.splits[split]
    stats = read_profile(env.loaded.base_dir / name).rows_of(view.shaper.split)
    rows = [stats[view.index[i]] for i in range(len(view)) if view.index[i] in stats]
    bins = histogram(rows)
    top = max(bins) or 1
    sparkline = "".join(_BARS[round(n / top * (len(_BARS) - 1))] for n in bins)
    return {"profile": {"table": name, "tasks": len(rows), "histogram": bins, "sparkline": sparkline}}


_BARS = " ▁▂▃▄▅▆▇█"


def _sample(env: Environment) -> dict[str, Any] | None:
    """The conversation of task 0 of the first split, images elided; None when there is no task."""
    view = next(iter(env.splits.values()), None)
    if view is None or len(view) == 0:
        return None
    sample: dict[str, Any] = {"split": view.name, "index": 0}
    try:
        task = view.task(0)
        sample["task_id"] = task.get("id")
        sample["messages"] = [_elide_images(m.model_dump(mode="json")) for m in env.messages(task)]
    except EnvbuilderError as exc:
        sample["error"] = str(exc)
    return sample


def _elide_images(value: Any) -> Any:
    """Replace the base64 data of image blocks (at any depth) by its size."""
    if isinstance(value, list):
        return [_elide_images(v) for v in value]
    if not isinstance(value, dict):
        return value
    if value.get("type") == "image" and isinstance(value.get("data"), str):
        return {
            "type": "image",
            "mimeType": value.get("mimeType"),
            "elided": True,
            "base64_chars": len(value["data"]),
        }
    return {k: _elide_images(v) for k, v in value.items()}


def _redact(value: Any) -> Any:
    if isinstance(value, list):
        return [_redact(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {
        k: ("<redacted>" if _SECRET_KEY.search(str(k)) and v is not None else _redact(v))
        for k, v in value.items()
    }
