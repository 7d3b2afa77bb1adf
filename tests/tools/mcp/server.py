"""A small MCP server for the tests, written with the SDK's ``MCPServer`` (FastMCP).

``python server.py stdio`` serves over stdin and stdout; ``python server.py
http PORT`` serves streamable HTTP on 127.0.0.1:PORT at ``/mcp`` (PORT 0: one it
picks), saying ``listening on PORT`` on stdout once it listens, and when
``EXPECT_TOKEN`` is set it refuses any request whose ``Authorization`` header is
not ``Bearer <EXPECT_TOKEN>``. With ``GROWN`` naming a file, it also serves a tool
for each name on a line of that file when it starts, and ``grow`` adds one.
"""

from __future__ import annotations

import base64
import os
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

# tests.images.png(9, 3), spelled out: the tests copy this script where the tests package is not
CHART_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAkAAAADCAIAAADOaLIhAAAADElEQVR4nGNgoD4AAABUAAGT58M4AAAAAElFTkSuQmCC"
)

server = MCPServer("covey-test", log_level="WARNING")


class Weather(BaseModel):
    city: str
    celsius: int


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def weather(city: str) -> Weather:
    """Today's weather in a city (structured content)."""
    return Weather(city=city, celsius=len(city))


@server.tool(structured_output=False)
def chart(label: str) -> list[Any]:
    """A chart: a line of text and a 9x3 PNG, two content blocks."""
    return [f"chart of {label}", Image(data=CHART_PNG, format="png")]


@server.tool()
def fail(message: str) -> str:
    """Fail, so the server answers with an error result carrying ``message``."""
    raise ToolError(message)


@server.tool()
def pid() -> int:
    """This server process's id, to tell a restarted server from the first."""
    return os.getpid()


@server.tool()
def call_id(ctx: Context) -> str:
    """The call id covey sent in the request's ``_meta``."""
    return str((ctx.request_context.meta or {}).get("covey/call_id"))


@server.tool()
def hang(marker: str, seconds: float) -> str:
    """Touch ``marker``, then sleep: a call the tests can catch in flight."""
    Path(marker).touch()
    time.sleep(seconds)
    return "woke"


def _grown(name: str) -> None:
    """Serve a tool ``name`` that answers ``grown NAME``."""

    def answer() -> str:
        return f"grown {name}"

    server.add_tool(answer, name=name, description=f"A tool added while the server ran: {name}.")


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Serve a new tool ``name`` (kept in the ``GROWN`` file for a restart), and say the list changed."""
    _grown(name)
    if os.environ.get("GROWN"):
        with open(os.environ["GROWN"], "a") as f:
            f.write(f"{name}\n")
    await ctx.notify_tools_changed()  # to a client listening (protocol 2026-07-28)
    try:
        await ctx.request_context.session.send_tool_list_changed()  # to a session of an older protocol
    except Exception:  # a 2026-07-28 connection carries no such notification
        pass
    return f"serving {name}"


def _token_check(app: Any, token: str) -> Any:
    async def checked(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or [])
        if scope["type"] == "http" and headers.get(b"authorization") != f"Bearer {token}".encode():
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"wrong or missing token"})
            return
        await app(scope, receive, send)

    return checked


if __name__ == "__main__":
    if os.environ.get("GROWN") and Path(os.environ["GROWN"]).exists():
        for line in Path(os.environ["GROWN"]).read_text().split():
            _grown(line)
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        import uvicorn

        from covey.cli.exposure import listening

        app = server.streamable_http_app()
        token = os.environ.get("EXPECT_TOKEN")
        served = _token_check(app, token) if token else app
        sock = listening("127.0.0.1", int(sys.argv[2]))  # as covey ui binds; 0: a port the kernel picks
        print(f"listening on {sock.getsockname()[1]}", flush=True)  # what a test waits for
        uvicorn.Server(uvicorn.Config(served, log_level="warning")).run(sockets=[sock])
