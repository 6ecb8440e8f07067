"""The MCP door: one episode of an environment served as a Model Context Protocol server.

``envbuilder mcp SPEC`` starts an episode on one task and speaks MCP over stdio (through the
official ``mcp`` SDK), so any MCP client (a desktop assistant, an agent framework) can play it:

* **tools**: the episode's tools with their schemas, the answer tool (``submit``, or a spec's
  ``send_message``) included. A call's result is the tool's text; its reward, whether the
  episode has finished and the metadata are in the result's structured content
  (``{"reward", "finished", "metadata"}``), and a failed call is an ``isError`` result;
* **prompt** ``task``: the task's prompt as messages (system messages are folded into the first
  user message: MCP prompts have user and assistant roles only);
* **resource** ``episode://prompt``: the prompt as text.

The episode lives in this process (one client, one episode); the next episode is a new process.
"""

from __future__ import annotations

from typing import Any, Literal

from envbuilder._version import __version__
from envbuilder.environment import Environment, Episode
from envbuilder.errors import EnvbuilderError
from envbuilder.protocol import RunToolSuccess, TextBlock

__all__ = ["episode_server", "serve_stdio"]

PROMPT_URI = "episode://prompt"


def _text(blocks: list[Any]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))


def episode_server(env: Environment, episode: Episode) -> Any:
    """An MCP server (``mcp.server.lowlevel.Server``) over ``episode`` of ``env``."""
    try:
        from mcp import types
        from mcp.server.lowlevel import Server
    except ImportError:
        raise EnvbuilderError(
            "the MCP door needs the MCP SDK, which is not installed",
            hint="pip install 'envbuilder[mcp]'",
            code="mcp_missing",
        ) from None

    # The version clients see in `serverInfo` is envbuilder's (the SDK would report its own).
    server: Any = Server(f"envbuilder-{env.name}", version=__version__)
    listing = env.task_tools(episode.task)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(name=t.name, description=t.description, inputSchema=t.input_schema or {})
            for t in listing.tools
        ]

    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        result = await env.call_tool(episode, name, arguments)
        if not isinstance(result, RunToolSuccess):
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=result.error)], isError=True
            )
        out = result.output
        metadata = out.metadata or {}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=_text(out.blocks))],
            structuredContent={"reward": out.reward, "finished": out.finished, "metadata": metadata},
            isError=bool(metadata.get("error")),
        )

    @server.list_prompts()
    async def list_prompts() -> list[types.Prompt]:
        return [types.Prompt(name="task", description=f"The task of this {env.name} episode.")]

    @server.get_prompt()
    async def get_prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        if name != "task":
            raise ValueError(f"unknown prompt {name!r}; the prompt is 'task'")
        messages: list[types.PromptMessage] = []
        folded: list[str] = []
        for message in env.messages(episode.task):
            text = _text(message.blocks)
            if message.role == "system":
                folded.append(text)
                continue
            if folded and message.role == "user":
                text = "\n\n".join([*folded, text])
                folded = []
            role: Literal["user", "assistant"] = "assistant" if message.role == "assistant" else "user"
            messages.append(types.PromptMessage(role=role, content=types.TextContent(type="text", text=text)))
        return types.GetPromptResult(
            description=f"{env.name} task {episode.task.get('id')}", messages=messages
        )

    @server.list_resources()
    async def list_resources() -> list[types.Resource]:
        return [types.Resource(uri=PROMPT_URI, name="prompt", mimeType="text/plain")]  # type: ignore[arg-type]

    @server.read_resource()
    async def read_resource(uri: Any) -> str:
        if str(uri) != PROMPT_URI:
            raise ValueError(f"unknown resource {uri}")
        return "\n\n".join(_text(m.blocks) for m in env.messages(episode.task))

    return server


async def serve_stdio(env: Environment, episode: Episode) -> None:
    """Serve ``episode`` over stdio until the client goes away."""
    try:
        from mcp.server.stdio import stdio_server
    except ImportError:
        raise EnvbuilderError(
            "the MCP door needs the MCP SDK", hint="pip install 'envbuilder[mcp]'"
        ) from None

    server = episode_server(env, episode)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
