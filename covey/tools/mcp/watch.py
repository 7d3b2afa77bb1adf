"""A transport that notices its server has gone, so no call is sent to a dead session.

The SDK fails every call on a connection whose server is gone, including one sent
after it went, and cannot tell the two apart: a call cut off mid-way may have run,
one sent to a stdio server that died between calls never did. Watching the read
stream's end lets the session open a new one before the call instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from types import TracebackType
from typing import Any

import anyio
from mcp.client import Transport

_ENDS = (StopAsyncIteration, anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError)


@contextlib.asynccontextmanager
async def watched(transport: Transport, ended: asyncio.Event) -> AsyncIterator[tuple[Any, Any]]:
    """``transport``, whose read stream sets ``ended`` when it ends."""
    async with transport as (reads, writes):
        yield _Reads(reads, ended), writes


class _Reads:
    """The transport's read stream, setting ``ended`` as it ends; all else is the stream's."""

    def __init__(self, stream: Any, ended: asyncio.Event) -> None:
        self._stream, self._ended = stream, ended

    def __getattr__(self, name: str) -> Any:  # e.g. `last_context`, which the SDK reads if present
        return getattr(self._stream, name)

    async def receive(self) -> Any:
        return await self._noting_the_end(self._stream.receive())

    async def __anext__(self) -> Any:
        return await self._noting_the_end(self._stream.__anext__())

    async def _noting_the_end(self, item: Awaitable[Any]) -> Any:
        try:
            return await item
        except _ENDS:
            self._ended.set()
            raise

    def __aiter__(self) -> _Reads:
        return self

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _Reads:
        await self._stream.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._stream.__aexit__(exc_type, exc, tb)
