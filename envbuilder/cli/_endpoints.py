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


def endpoint_url(value: str | None) -> str | None:
    """The callback of every option that takes an endpoint's URL: a usage error (exit 2) before
    anything runs when it is not an http(s) URL with a host."""
    from envbuilder.spec import url_problem

    problem = url_problem(value) if value is not None else None
    if problem is not None:
        raise typer.BadParameter(f"{value!r} {problem}; give the API root, e.g. http://127.0.0.1:8000/v1")
    return value


def target_urls(values: list[str]) -> list[str]:
    """The callback of ``eval``'s targets: one that names a server or catalog by an http(s) URL
    must be one (a usage error otherwise); paths and s3://, gs://, hf:// names are left as given."""
    from envbuilder.spec import url_problem

    for value in values:
        scheme = value.partition("://")[0].lower() if "://" in value else ""
        problem = url_problem(value) if scheme in ("http", "https") else None
        if problem is not None:
            raise typer.BadParameter(f"{value!r} {problem}; give a server's URL, e.g. http://127.0.0.1:8080")
    return values


UserBaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--user-base-url",
        help="The simulated user's API root instead of the spec's `user.base_url` "
        "(also $ENVBUILDER_USER_BASE_URL).",
        rich_help_panel=PANEL,
        callback=endpoint_url,
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
        callback=endpoint_url,
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
