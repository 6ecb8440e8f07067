"""Model endpoints overridden without editing a spec: the simulated user's and the judge's base
URL, model and API key, and the reply cache, from environment variables.

``serve``, ``eval`` and ``check`` set these variables from their flags (``--user-base-url``,
``--judge-model``, ``--no-cache`` …) before any spec loads, so a flag wins over a variable already
set, a variable wins over the spec, and worker processes inherit the choice:

======================================  =====================================================
``ENVBUILDER_USER_BASE_URL``             the simulated user's ``base_url`` (``user:``)
``ENVBUILDER_USER_MODEL``                its ``model``
``ENVBUILDER_USER_API_KEY``              its API key, used for every session (the session's
                                         secret is then not read)
``ENVBUILDER_JUDGE_BASE_URL``/``_MODEL`` the same for every ``llm_judge`` grader of the spec
``ENVBUILDER_JUDGE_API_KEY``
``ENVBUILDER_REPLY_CACHE=off``           no reply is read from or written to the cache
======================================  =====================================================

An override replaces the spec's value in memory only (the spec file, its pack and its hash are
unchanged); :func:`override_endpoints` also says, for each endpoint, what it uses and where each
value came from, for the start-up lines (never the key itself).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from envbuilder.errors import EnvbuilderError
from envbuilder.spec import GraderConfig, Spec, UserSpec, url_problem

__all__ = ["ENDPOINT_VARIABLES", "EndpointUse", "endpoint_variable", "override_endpoints"]

ROLES = ("user", "judge")
FIELDS = ("base_url", "model", "api_key")
CACHE_VARIABLE = "ENVBUILDER_REPLY_CACHE"


def endpoint_variable(role: str, name: str) -> str:
    """``ENVBUILDER_USER_BASE_URL`` and its kin."""
    return f"ENVBUILDER_{role.upper()}_{name.upper()}"


ENDPOINT_VARIABLES = (*(endpoint_variable(r, f) for r in ROLES for f in FIELDS), CACHE_VARIABLE)
"""Every variable this module reads."""


@dataclass(frozen=True)
class EndpointUse:
    """One model endpoint of a spec as it will be used."""

    role: str
    """``user`` or ``judge``."""
    where: str
    """Its block in the spec: ``user``, ``grader``, ``grader.graders[1]``."""
    base_url: str
    model: str
    key: str
    """Where the API key is read from, e.g. ``$ENVBUILDER_USER_API_KEY`` or ``the session's
    OPENAI_API_KEY secret, else $OPENAI_KEY`` (never the key)."""
    cache: bool
    overridden: frozenset[str] = field(default_factory=frozenset)
    """The fields an environment variable replaced (``base_url``, ``model``, ``api_key``,
    ``cache``)."""


def _overrides(role: str) -> dict[str, Any]:
    """The spec fields the environment replaces for ``role``'s endpoints."""
    out: dict[str, Any] = {}
    url = os.environ.get(endpoint_variable(role, "base_url"), "").strip()
    if url:
        problem = url_problem(url)
        if problem is not None:
            raise EnvbuilderError(
                f"{endpoint_variable(role, 'base_url')} {problem} (got {url!r})",
                hint=f"Give the API root, e.g. --{role}-base-url http://127.0.0.1:8000/v1",
                code="endpoint_override",
            )
        out["base_url"] = url.rstrip("/")
    model = os.environ.get(endpoint_variable(role, "model"), "").strip()
    if model:
        out["model"] = model
    if os.environ.get(endpoint_variable(role, "api_key")):
        out["api_key_env"] = endpoint_variable(role, "api_key")
        out["api_key_secret"] = None
    if os.environ.get(CACHE_VARIABLE, "").strip().lower() in ("off", "0", "false", "no"):
        out["cache"] = False
    return out


def _key(config: Any) -> str:
    secret, env = config.api_key_secret, config.api_key_env
    parts = [f"the session's {secret} secret"] if secret else []
    parts += [f"${env}"] if env else []
    return ", else ".join(parts) or "none"


def override_endpoints(spec: Spec) -> tuple[Spec, list[EndpointUse]]:
    """``spec`` with the environment's overrides applied to its simulated user and its judges,
    and what each endpoint uses.

    Raises:
        EnvbuilderError: a base URL override that is not an http(s) URL.
    """
    changes = {role: _overrides(role) for role in ROLES}
    uses: list[EndpointUse] = []

    def use(role: str, where: str, config: Any) -> None:
        renamed = {"api_key_env": "api_key", "api_key_secret": "api_key"}
        fields = frozenset(renamed.get(k, k) for k in changes[role])
        key = _key(config)
        uses.append(EndpointUse(role, where, config.base_url, config.model, key, config.cache, fields))

    def walk(value: Any, where: str) -> Any:
        if isinstance(value, BaseModel):
            updates = {}
            for name in type(value).model_fields:
                old = getattr(value, name)
                new = walk(old, f"{where}.{name}" if where else name)
                if new is not old:
                    updates[name] = new
            role = (
                "user"
                if isinstance(value, UserSpec)
                else "judge"
                if isinstance(value, GraderConfig) and {"base_url", "model"} <= set(type(value).model_fields)
                else None
            )
            if role is not None:
                updates.update(changes[role])
            made = value.model_copy(update=updates) if updates else value
            if role is not None:
                use(role, where, made)
            return made
        if isinstance(value, list):
            items = [walk(v, f"{where}[{i}]") for i, v in enumerate(value)]
            return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
        if isinstance(value, dict):
            entries = {k: walk(v, f"{where}.{k}") for k, v in value.items()}
            return entries if any(entries[k] is not value[k] for k in value) else value
        return value

    return walk(spec, ""), uses
