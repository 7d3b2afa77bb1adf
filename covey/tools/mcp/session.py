"""One MCP server's session in this worker process, through the official ``mcp`` client.

A session is opened on first use and shared by every slot of the process; its
tool list is fetched as it opens, and again whenever the server says the list
changed (``notifications/tools/list_changed`` on an older protocol, a
``subscriptions/listen`` event on 2026-07-28): each listing is handed to the
session's ``listed`` callback, which serves the new tools. When its connection breaks (the server
died, the HTTP server went away) it is dropped, and the next call opens a new one,
starting a stdio server again. A server that cannot be started or reached only
makes its own tools fail, with the reason, never the worker. Every coroutine here
runs on the process's MCP loop (``covey.tools.mcp.loop``), so the state needs no lock
but the one that keeps two slots from opening the same server at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client import Transport
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from covey.errors import CoveyError
from covey.tools.mcp.config import HttpServer, Server, StdioServer
from covey.tools.mcp.watch import watched

log = logging.getLogger(__name__)

# The request's `_meta` key that carries ToolContext.call_id, stable across a redelivered
# step, so a server can make a tool idempotent (an MCP server gets no ToolContext).
CALL_ID_META = "covey/call_id"
# Starting a server and listing its tools, whatever its per-call timeout: a Python
# stdio server spends a second or more importing the SDK on a busy machine.
OPEN_SECONDS = 30.0
MAX_TOOL_PAGES = 100  # pages of tools/list: a server that paginates forever cannot hang the worker's start
HTTP_CONNECT_SECONDS = 30.0  # the SDK's own default for connect, write and pool; a call's wait is bounded per call


class McpUnavailable(CoveyError, ConnectionError):
    """A server that cannot be started or reached, or whose connection broke during
    the call; the next call tries again."""


class McpToolFailed(CoveyError, RuntimeError):
    """The server answered the call with an error: its error result, or a refusal
    of the request (an unknown tool, bad arguments, its own timeout)."""


@dataclass
class _Open:
    client: Client
    tools: list[types.Tool]
    stop: asyncio.Event  # set to close the session: the task that opened it must also close it
    closed: asyncio.Event  # set once it has (a stdio server stopped)
    ended: asyncio.Event  # set when the server has gone: the session cannot serve another call


class Session:
    """A lazily opened, self-healing session with one configured server."""

    def __init__(self, name: str, server: Server, environ: Mapping[str, str] = os.environ) -> None:
        self.name, self.server = name, server
        self._environ = environ
        self._pid = -1
        self._open: _Open | None = None
        self._opening: asyncio.Lock | None = None
        self.listed: Callable[[Session, list[types.Tool]], None] | None = None  # each listing, as it comes

    async def tools(self) -> list[types.Tool]:
        """The server's tools, listed once per session."""
        return (await self._session()).tools

    async def call(self, tool: str, arguments: dict[str, Any], call_id: str) -> types.CallToolResult:
        """The server's result of one call, error results included. ``McpUnavailable``
        when the server cannot be reached or dies during the call; ``McpToolFailed``
        when it refuses the request."""
        opened = await self._session()
        try:
            return await opened.client.call_tool(
                tool, arguments, read_timeout_seconds=self.server.timeout, meta=_meta(call_id)
            )
        except MCPError as e:
            if e.code != CONNECTION_CLOSED:
                raise McpToolFailed(f"MCP server {self.name!r}: {e.message}") from e
            cause: Exception = e
        except (OSError, httpx2.HTTPError) as e:
            cause = e
        self._drop(opened)
        log.warning("MCP server %r: connection lost during a call to %r: %s", self.name, tool, _reason(cause))
        raise McpUnavailable(
            f"MCP server {self.name!r}: the connection was lost during the call ({_reason(cause)}); "
            "the next call opens a new session"
        ) from cause

    async def close(self) -> None:
        """End the session, if one is open, once a stdio server has stopped."""
        opened = self._open
        if opened is not None and self._pid == os.getpid():
            self._drop(opened)
            await opened.closed.wait()

    def _drop(self, opened: _Open) -> None:
        opened.stop.set()
        if self._open is opened:
            self._open = None

    async def _session(self) -> _Open:
        if self._pid != os.getpid():  # a forked child: the parent's session is not ours
            self._pid, self._open, self._opening = os.getpid(), None, asyncio.Lock()
        assert self._opening is not None
        async with self._opening:
            if self._open is not None and self._open.ended.is_set():
                log.info("MCP server %r: the connection ended between calls; opening a new session", self.name)
                self._drop(self._open)
            if self._open is None:
                self._open = await self._start()
            return self._open

    async def _start(self) -> _Open:
        ready: asyncio.Future[_Open] = asyncio.get_running_loop().create_future()
        holder = asyncio.create_task(self._hold(ready), name=f"covey-mcp-{self.name}")
        try:
            return await asyncio.wait_for(asyncio.shield(ready), OPEN_SECONDS)
        except Exception as e:
            holder.cancel()
            reason = self._why_not_open(_first(e))
            log.warning("MCP server %r (%s) cannot be used: %s", self.name, self.server.describe(), reason)
            raise McpUnavailable(f"MCP server {self.name!r} is unavailable: {reason}") from e

    def _why_not_open(self, cause: BaseException) -> str:
        if isinstance(cause, TimeoutError):
            return f"no answer within {OPEN_SECONDS:g}s"
        if isinstance(cause, MCPError) and cause.code == CONNECTION_CLOSED and isinstance(self.server, StdioServer):
            return "the process ended before it answered (what it said is on the worker's stderr)"
        return _reason(cause)

    async def _hold(self, ready: asyncio.Future[_Open]) -> None:
        """Open the session, hand it over, and keep it open until it is dropped: the
        SDK's client must be entered and left by the same task."""
        closed, ended, changed = asyncio.Event(), asyncio.Event(), asyncio.Event()
        try:
            async with Client(
                watched(self._transport(), ended), read_timeout_seconds=OPEN_SECONDS, message_handler=_noting(changed)
            ) as client:
                opened = _Open(client, await _list_tools(client), asyncio.Event(), closed, ended)
                ready.set_result(opened)
                self._hand_on(opened.tools)
                following = [
                    asyncio.create_task(_listening(self.name, client, changed)),
                    asyncio.create_task(self._relisting(opened, changed)),
                ]
                try:
                    await opened.stop.wait()
                finally:
                    for task in following:
                        task.cancel()
                    await asyncio.gather(*following, return_exceptions=True)
        except Exception as e:
            if not ready.done():
                ready.set_exception(e)
            else:
                log.info("MCP server %r: session ended: %s", self.name, _reason(e))
        finally:
            closed.set()

    async def _relisting(self, opened: _Open, changed: asyncio.Event) -> None:
        """List the tools again each time the server says they changed, for as long
        as the session is open; a listing that fails keeps the tools the last one found."""
        while True:
            await changed.wait()
            changed.clear()
            try:
                opened.tools = await _list_tools(opened.client, cache_mode="refresh")
            except Exception as e:
                log.warning("MCP server %r: its tools changed, but listing them failed: %s", self.name, _reason(e))
                continue
            log.info("MCP server %r: its tools changed; %d listed", self.name, len(opened.tools))
            self._hand_on(opened.tools)

    def _hand_on(self, tools: list[types.Tool]) -> None:
        if self.listed is not None:
            try:
                self.listed(self, tools)
            except Exception as e:  # a name another source took: the tools served stay as they were
                log.error("MCP server %r: its tools as listed now cannot be served: %s", self.name, e)

    def _transport(self) -> Transport:
        if isinstance(self.server, StdioServer):
            s = self.server
            return stdio_client(StdioServerParameters(command=s.command, args=s.args, env=s.env))
        return _http(self.name, self.server, self._header_values(self.server))

    def _header_values(self, server: HttpServer) -> dict[str, str]:
        values = {}
        for header, variable in server.headers.items():
            value = self._environ.get(variable)
            if not value:
                raise McpUnavailable(f"header {header}: its variable {variable} is not set on this worker")
            values[header] = value
        return values


@contextlib.asynccontextmanager
async def _http(name: str, server: HttpServer, headers: dict[str, str]) -> AsyncIterator[Any]:
    """The streamable HTTP transport with the configured headers on every request.
    The SDK reports a refused request without its status, so a refusal is logged
    with it here (a 401 is a wrong token, a 404 a wrong path)."""

    async def refused(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            log.warning("MCP server %r: HTTP %d from %s", name, response.status_code, server.url)

    timeout = httpx2.Timeout(HTTP_CONNECT_SECONDS, read=max(server.timeout, OPEN_SECONDS))
    async with httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks={"response": [refused]}) as http:
        async with streamable_http_client(str(server.url), http_client=http) as streams:
            yield streams


def _noting(changed: asyncio.Event):
    """A message handler that sets ``changed`` on a server's tools/list_changed
    notification (protocols before 2026-07-28)."""

    async def handle(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    return handle


async def _listening(name: str, client: Client, changed: asyncio.Event) -> None:
    """Set ``changed`` on each tools-changed event of a ``subscriptions/listen`` stream
    (2026-07-28). On an older protocol the server notifies the session instead; a
    stream that ends is not opened again (the next session listens anew)."""
    try:
        async with client.listen(tools_list_changed=True) as subscription:
            async for _ in subscription:
                changed.set()
    except ListenNotSupportedError:
        return
    except Exception as e:
        log.info("MCP server %r: no longer told of changes to its tools: %s", name, _reason(e))


async def _list_tools(client: Client, cache_mode: Literal["use", "refresh"] = "use") -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode=cache_mode)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _meta(call_id: str) -> types.RequestParamsMeta:
    # An open TypedDict (PEP 728's extra_items), whose extra keys mypy cannot check yet.
    return cast(types.RequestParamsMeta, {CALL_ID_META: call_id})


def _first(e: BaseException) -> BaseException:
    """An exception group (the SDK's task groups raise them) read through to its first cause."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def _reason(e: BaseException) -> str:
    """One line for a log or a model: the exception's message, or its type when it has none."""
    e = _first(e)
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
