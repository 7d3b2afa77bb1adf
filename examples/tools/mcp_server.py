"""A ten-line MCP server: `python examples/tools/mcp_server.py` over stdio, `--http` on :8931."""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("weather")


@server.tool()
def forecast(city: str) -> str:
    """Tomorrow's forecast for a city."""
    return f"{city}: sunny, 21 °C"


if __name__ == "__main__":
    if sys.argv[1:] == ["--http"]:
        server.run("streamable-http", port=8931)
    else:
        server.run()
