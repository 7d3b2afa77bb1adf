"""The example MCP server and servers file in examples/tools/ work as their comments say."""

from __future__ import annotations

from pathlib import Path

from covey.tools.mcp.config import HttpServer, load
from covey.tools.mcp.servers import McpServers
from covey.tools.mcp.session import Session
from tests.tools.mcp.test_servers import call

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "tools"


def test_the_example_stdio_server_answers_from_the_repo_root(monkeypatch):
    servers = load(EXAMPLES / "mcp.toml")
    assert isinstance(servers["remote"], HttpServer)
    monkeypatch.chdir(EXAMPLES.parents[1])  # its command names the server from the repo root
    weather = McpServers([Session("weather", servers["weather"])])
    try:
        (forecast,) = weather.tools()
        assert forecast.name == "weather__forecast"
        assert call(forecast, city="Lyon") == "Lyon: sunny, 21 °C"
    finally:
        weather.close()
