"""The configured MCP servers' tools, as the worker serves them.

Each tool of server ``files`` becomes a ``Tool`` named ``files__<tool>``, whose
``run`` calls the server through the process's session with the server's timeout.
The tools are listed when the worker starts, so they can be offered and published;
a server that cannot be used then is logged with its reason and serves none,
while the others serve theirs. It is listed again in the background, after
``FIRST_RETRY_SECONDS`` and then twice as long each time up to
``MAX_RETRY_SECONDS``, and serves its tools from the listing that finds it up:
a worker started before its MCP server (a compose file, a restart) need not be
restarted after it. A forked child (the prefork pool) keeps listing in its own
process.

A server that is served has its tools served anew whenever a listing finds them
changed: after it says so (``tools/list_changed``), or as a session opens again
(the server restarted with other tools). A forked child learns of a change as
its own session opens or is told.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import mcp_types as types

from covey.tools import images
from covey.tools.mcp import loop
from covey.tools.mcp.config import load
from covey.tools.mcp.results import text
from covey.tools.mcp.session import OPEN_SECONDS, McpToolFailed, Session
from covey.tools.tool import NAME, Tool, ToolContext

log = logging.getLogger(__name__)

SEPARATOR = "__"  # between the server's name and its tool's: `files__read`
CLOSE_SECONDS = 10.0  # the SDK gives a stdio server 2 s to exit on its own, then 2 s after SIGTERM
MARGIN_SECONDS = 5.0  # beyond the session's own bounds, for the loop to hand the answer back
FIRST_RETRY_SECONDS = 5.0  # before a server that could not be used at start is listed again
MAX_RETRY_SECONDS = 60.0  # the longest wait between two listings of a server still down

Serve = Callable[[list["Tool"]], None]
ServeAgain = Callable[[str, list["Tool"]], None]  # a server's origin, and all its tools now


def mcp_tools(
    path: Path, late: Serve, changed: ServeAgain, environ: Mapping[str, str] = os.environ
) -> tuple[list[Tool], list[str]]:
    """Every tool of every server in the MCP servers file ``path`` (``COVEY_MCP``) that
    can be used now, for the worker's registry, and the name prefixes (``files__``)
    of the servers down now: their tools are handed to ``late`` once a later listing
    finds them up (``McpServers.serve_late``). A served server's tools, once a
    listing finds them changed, are handed to ``changed`` (``McpServers.follow``)."""
    servers = McpServers.load(path, environ)
    servers.follow(changed)
    tools = servers.tools()
    servers.serve_late(late)
    return tools, [f"{session.name}{SEPARATOR}" for session in servers.down]


class McpServers:
    """The configured servers' sessions in this process."""

    def __init__(self, sessions: list[Session]) -> None:
        self.sessions = sessions
        self.down: list[Session] = []  # servers the last listing could not use
        self._serving: dict[str, list[dict[str, Any]]] = {}  # by server: the schemas of the tools served

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
        listed, self.down = self._listed(self.sessions)
        for name, tools in listed.items():
            self._serving[name] = _schemas(tools)
        return [t for tools in listed.values() for t in tools]

    def follow(self, changed: ServeAgain) -> None:
        """Hand each served server's tools to ``changed`` whenever a listing of its
        session finds them other than those served."""
        for session in self.sessions:
            session.listed = partial(self._listed_again, changed)

    def _listed_again(self, changed: ServeAgain, session: Session, listed: list[types.Tool]) -> None:
        served = self._serving.get(session.name)
        tools = _tools(session, listed)
        if served is None or _schemas(tools) == served:
            return  # not served yet (its first listing serves it), or as served
        changed(_origin(session), tools)
        self._serving[session.name] = _schemas(tools)
        log.info("MCP server %r: its tools are served anew: %s", session.name, ", ".join(t.name for t in tools))

    def serve_late(self, serve: Serve) -> None:
        """List the servers that were down again in the background, with a growing
        wait, and hand each one's tools to ``serve`` once it is up; in this process
        and in any child forked from it."""
        if not self.down:
            return
        os.register_at_fork(after_in_child=lambda: self._keep_listing(serve))
        self._keep_listing(serve)

    def _keep_listing(self, serve: Serve) -> None:
        threading.Thread(target=self._until_up, args=(serve,), name="covey-mcp-late", daemon=True).start()

    def _until_up(self, serve: Serve) -> None:
        wait = FIRST_RETRY_SECONDS
        while self.down:
            time.sleep(wait)
            wait = min(wait * 2, MAX_RETRY_SECONDS)
            try:
                listed, still = self._listed(self.down)
            except loop.NoAnswer as e:  # the loop itself did not answer: tried again later
                log.warning("MCP servers %s: listing them again failed: %s", [s.name for s in self.down], e)
                continue
            up, self.down = [s for s in self.down if s not in still], still
            try:
                serve([t for session in up for t in listed[session.name]])
            except Exception as e:  # a name another source took: those servers serve nothing
                log.error("MCP servers %s are up, but their tools cannot be served: %s", [s.name for s in up], e)
                continue
            for session in up:
                self._serving[session.name] = _schemas(listed[session.name])
                log.info("MCP server %r is up now: its tools are served from here on", session.name)

    def _listed(self, sessions: list[Session]) -> tuple[dict[str, list[Tool]], list[Session]]:
        """The tools of ``sessions`` listed at once, by server, and the sessions that could
        not be used (each logged why): a slow server delays the others by its own bound only."""
        bound = OPEN_SECONDS + MARGIN_SECONDS
        tools: dict[str, list[Tool]] = {}
        down: list[Session] = []
        for session, listed in zip(sessions, loop.run(_list_all(sessions), bound)):
            if isinstance(listed, BaseException):
                down.append(session)
            else:
                tools[session.name] = _tools(session, listed)
        return tools, down

    def close(self) -> None:
        """End every open session, stopping the stdio servers, as a worker process exits."""
        if self.sessions:
            loop.run(_close_all(self.sessions), CLOSE_SECONDS)


async def _list_all(sessions: list[Session]) -> list[list[types.Tool] | BaseException]:
    """Every server's tools, opened at once."""
    return await asyncio.gather(*(session.tools() for session in sessions), return_exceptions=True)


async def _close_all(sessions: list[Session]) -> None:
    await asyncio.gather(*(session.close() for session in sessions))


def _origin(session: Session) -> str:
    return f"mcp {session.name}"


def _schemas(tools: list[Tool]) -> list[dict[str, Any]]:
    """What the model is offered of ``tools``: two listings alike in it serve alike."""
    return [t.schema() for t in tools]


def _tools(session: Session, listed: list[types.Tool]) -> list[Tool]:
    out = []
    for found in listed:
        if not session.server.serves(found.name):  # its file's include and exclude
            continue
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
                origin=_origin(session),
                description=found.description or found.title or found.name,
                parameters=found.input_schema,
                run=partial(_run, session, found.name),
                timeout=session.server.timeout,
                needs_approval=session.server.approves(found.name),
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
    return text(result, partial(images.kept, context))
