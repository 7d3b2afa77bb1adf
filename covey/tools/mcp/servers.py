"""The configured MCP servers' tools, as the worker serves them.

Each tool of server ``files`` becomes a ``Tool`` named ``files__<tool>``, whose
``run`` calls the server through the process's session with the server's timeout.
The tools are listed when the worker starts, so they can be offered and published;
a server that cannot be used then is logged with its reason and serves none,
while the others serve theirs.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import mcp_types as types

from covey.tools.mcp import loop
from covey.tools.mcp.config import load
from covey.tools.mcp.results import text
from covey.tools.mcp.session import OPEN_SECONDS, McpToolFailed, Session
from covey.tools.tool import NAME, Tool, ToolContext

log = logging.getLogger(__name__)

SEPARATOR = "__"  # between the server's name and its tool's: `files__read`
CLOSE_SECONDS = 10.0  # the SDK gives a stdio server 2 s to exit on its own, then 2 s after SIGTERM
MARGIN_SECONDS = 5.0  # beyond the session's own bounds, for the loop to hand the answer back


def mcp_tools(path: Path, environ: Mapping[str, str] = os.environ) -> list[Tool]:
    """Every tool of every server in the MCP servers file ``path`` (``COVEY_MCP``), for
    the worker's registry: ``McpServers.load(path).tools()``."""
    return McpServers.load(path, environ).tools()


class McpServers:
    """The configured servers' sessions in this process."""

    def __init__(self, sessions: list[Session]) -> None:
        self.sessions = sessions

    @classmethod
    def load(cls, path: Path, environ: Mapping[str, str] = os.environ) -> McpServers:
        """The servers of a file; a bad file raises ``McpFileError`` (one line naming
        the server and field). Nothing is started yet."""
        return cls([Session(name, server, environ) for name, server in load(path).items()])

    def tools(self) -> list[Tool]:
        """Every server's tools, its session opened to list them (and kept open for the
        process's calls). A server that cannot be used is left out, its reason logged."""
        if not self.sessions:
            return []
        bound = OPEN_SECONDS + MARGIN_SECONDS  # the servers open at once
        tools: list[Tool] = []
        for session, listed in zip(self.sessions, loop.run(_list_all(self.sessions), bound)):
            if not isinstance(listed, BaseException):  # the session logged why it cannot be used
                tools.extend(_tools(session, listed))
        return tools

    def close(self) -> None:
        """End every open session, stopping the stdio servers, as a worker process exits."""
        if self.sessions:
            loop.run(_close_all(self.sessions), CLOSE_SECONDS)


async def _list_all(sessions: list[Session]) -> list[list[types.Tool] | BaseException]:
    """Every server's tools, opened at once: a slow server delays the start by its own bound only."""
    return await asyncio.gather(*(session.tools() for session in sessions), return_exceptions=True)


async def _close_all(sessions: list[Session]) -> None:
    await asyncio.gather(*(session.close() for session in sessions))


def _tools(session: Session, listed: list[types.Tool]) -> list[Tool]:
    out = []
    for found in listed:
        name = f"{session.name}{SEPARATOR}{found.name}"
        if not NAME.fullmatch(name):
            log.warning(
                "MCP server %r: tool %r left out: %r is not a tool name a model accepts (a-z A-Z 0-9 _ -, 64 at most)",
                session.name,
                found.name,
                name,
            )
            continue
        out.append(
            Tool(
                name=name,
                origin=f"mcp {session.name}",
                description=found.description or found.title or found.name,
                parameters=found.input_schema,
                run=partial(_run, session, found.name),
                timeout=session.server.timeout,
            )
        )
    return out


def _run(session: Session, tool: str, arguments: dict[str, Any], context: ToolContext) -> str:
    """One call: the result's text, or an exception whose message the model reads."""
    try:
        # Reopening a dropped session and the call itself each have their own bound.
        bound = OPEN_SECONDS + session.server.timeout + MARGIN_SECONDS
        result = loop.run(session.call(tool, arguments, context.call_id), bound)
    except loop.NoAnswer as e:
        raise McpToolFailed(f"MCP server {session.name!r}: {e}") from None
    if result.is_error:
        raise McpToolFailed(text(result) or f"MCP server {session.name!r}: tool {tool!r} failed without a message")
    return text(result)
