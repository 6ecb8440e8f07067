"""``envbuilder mcp SPEC``: one episode of an environment as an MCP server over stdio."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli._output import fail_on_errors
from envbuilder.cli._pull import TrustCodeOption


def mcp(
    spec: Annotated[Path, typer.Argument(help="The spec file (YAML).", exists=True, dir_okay=False)],
    split: Annotated[str | None, typer.Option(help="The task's split (default: the first).")] = None,
    index: Annotated[int, typer.Option(help="The task's index in the split.", min=0)] = 0,
    secrets: Annotated[
        str | None, typer.Option(help='Session secrets as JSON, e.g. \'{"OPENAI_API_KEY": "…"}\'.')
    ] = None,
    trust_code: TrustCodeOption = False,
) -> None:
    """Serve one episode of SPEC as an MCP server over stdio (tools, the `task` prompt).

    MCP clients start it as a command; the episode's tools (the answer tool included) become MCP
    tools, whose results carry the reward and `finished` in their structured content.
    """
    from envbuilder.environment import Episode, load_environment
    from envbuilder.server._mcp import serve_stdio

    with fail_on_errors():
        env = load_environment(spec, trust_code=True if trust_code else None)
        task = env.split(split or next(iter(env.splits))).task(index)
        given = json.loads(secrets) if secrets else {}
        if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
            raise typer.BadParameter("--secrets must be a JSON object of strings")
        episode = Episode(task=task, secrets=given)
    import asyncio  # here: `envbuilder --help` builds every command

    asyncio.run(serve_stdio(env, episode))
