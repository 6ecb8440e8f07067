"""A small MCP server written with the official SDK (FastMCP), for the `type: mcp` tool tests.

Run it as `python mcp_weather.py` (stdio) or `python mcp_weather.py http PORT` (streamable HTTP).
"""

from __future__ import annotations

import sys

from mcp.server.fastmcp import FastMCP

port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
server = FastMCP("weather", host="127.0.0.1", port=port)


@server.tool()
def forecast(city: str, days: int = 1) -> str:
    """The weather forecast for a city."""
    if city == "Atlantis":
        raise ValueError("no forecast for Atlantis")
    return f"{city}: sunny for {days} day{'s' if days != 1 else ''}"


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    server.run("streamable-http" if sys.argv[1:2] == ["http"] else "stdio")
