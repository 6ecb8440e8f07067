"""The model-endpoint flags of ``serve``, ``eval`` and ``check``: point the simulated user and the
judge elsewhere without editing the spec, or run without the reply cache.

A flag sets the environment variable of the same name (``--user-model`` →
``ENVBUILDER_USER_MODEL``, see :mod:`envbuilder.llm._endpoints`) for this process and the
workers it starts, so the precedence is: flag, then the variable, then the spec. A key is never
a flag's value (command lines are visible to other users): ``--user-api-key-env NAME`` names
the variable that holds it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Annotated, Any

import typer

PANEL = "Model endpoints (simulated user, judge)"

UserBaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--user-base-url",
        help="The simulated user's API root instead of the spec's `user.base_url` "
        "(also $ENVBUILDER_USER_BASE_URL).",
        rich_help_panel=PANEL,
    ),
]
UserModelOption = Annotated[
    str | None,
    typer.Option(
        "--user-model",
        help="The simulated user's model instead of the spec's (also $ENVBUILDER_USER_MODEL).",
        rich_help_panel=PANEL,
    ),
]
UserKeyEnvOption = Annotated[
    str | None,
    typer.Option(
        "--user-api-key-env",
        metavar="VAR",
        help="An environment variable holding the simulated user's API key, used for every session "
        "(also $ENVBUILDER_USER_API_KEY, the key itself).",
        rich_help_panel=PANEL,
    ),
]
JudgeBaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--judge-base-url",
        help="The API root of every llm_judge grader instead of the spec's "
        "(also $ENVBUILDER_JUDGE_BASE_URL).",
        rich_help_panel=PANEL,
    ),
]
JudgeModelOption = Annotated[
    str | None,
    typer.Option(
        "--judge-model",
        help="The judge's model instead of the spec's (also $ENVBUILDER_JUDGE_MODEL).",
        rich_help_panel=PANEL,
    ),
]
JudgeKeyEnvOption = Annotated[
    str | None,
    typer.Option(
        "--judge-api-key-env",
        metavar="VAR",
        help="An environment variable holding the judge's API key, used for every grade "
        "(also $ENVBUILDER_JUDGE_API_KEY, the key itself).",
        rich_help_panel=PANEL,
    ),
]
NoCacheOption = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="Neither read nor write the reply cache of the simulated user and the judge "
        "(also $ENVBUILDER_REPLY_CACHE=off); `envbuilder cache clear` empties it.",
        rich_help_panel=PANEL,
    ),
]


def apply_endpoint_flags(
    user_base_url: str | None = None,
    user_model: str | None = None,
    user_api_key_env: str | None = None,
    judge_base_url: str | None = None,
    judge_model: str | None = None,
    judge_api_key_env: str | None = None,
    no_cache: bool = False,
) -> frozenset[str]:
    """Set the variables of the flags given; the names of those set (for :func:`describe`).
    Exits 2 when a ``--*-api-key-env`` names a variable that is not set."""
    from envbuilder.llm import endpoint_variable

    flagged: set[str] = set()
    values = {
        ("user", "base_url"): user_base_url,
        ("user", "model"): user_model,
        ("judge", "base_url"): judge_base_url,
        ("judge", "model"): judge_model,
    }
    for (role, name), value in values.items():
        if value:
            os.environ[endpoint_variable(role, name)] = value
            flagged.add(endpoint_variable(role, name))
    for role, var in (("user", user_api_key_env), ("judge", judge_api_key_env)):
        if var:
            key = os.environ.get(var)
            if not key:
                typer.echo(f"error: --{role}-api-key-env {var}: the variable {var} is not set", err=True)
                raise typer.Exit(2)
            os.environ[endpoint_variable(role, "api_key")] = key
            flagged.add(endpoint_variable(role, "api_key"))
    if no_cache:
        os.environ["ENVBUILDER_REPLY_CACHE"] = "off"
        flagged.add("ENVBUILDER_REPLY_CACHE")
    return frozenset(flagged)


def describe(envs: Sequence[Any], flagged: frozenset[str]) -> list[str]:
    """One line per model endpoint of ``envs``: what it uses and where each value came from
    (a flag, a variable, the spec); the key's source only, never the key."""
    from envbuilder.llm import endpoint_variable

    lines = []
    for env in envs:
        for use in getattr(env, "endpoints", []):
            role = "simulated user" if use.role == "user" else "judge"

            def origin(name: str, role: str = use.role, fields: frozenset[str] = use.overridden) -> str:
                var = endpoint_variable(role, name)
                if name not in fields:
                    return "spec"
                flag = f"--{role}-{name.replace('_', '-')}" + ("-env" if name == "api_key" else "")
                return flag if var in flagged else f"${var}"

            key = f"{use.key} (from {origin('api_key')})" if "api_key" in use.overridden else use.key
            cache = "on" if use.cache else "off"
            lines.append(
                f"{env.name}: {role} ({use.where}) {use.model} [{origin('model')}] at {use.base_url} "
                f"[{origin('base_url')}], key: {key}, reply cache {cache}"
            )
    return lines
