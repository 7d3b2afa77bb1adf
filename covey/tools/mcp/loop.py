"""One asyncio event loop per process, in a daemon thread, for the MCP sessions.

The SDK's client is async and a session is tied to the loop it opened on, while
the worker calls tools from sync slots (threads, greenlets): every session of the
process lives on this one loop, and a slot hands it a coroutine and waits, with a
bound, for the answer. A forked child (the prefork pool) gets a loop of its own,
since a thread does not survive ``fork``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loops: dict[int, asyncio.AbstractEventLoop] = {}  # by process id


class NoAnswer(TimeoutError):
    """The loop did not finish a coroutine within the caller's bound (it is cancelled)."""


def run(coro: Coroutine[Any, Any, T], timeout: float) -> T:
    """Run ``coro`` on this process's loop and return its result, or raise what it raised.
    ``NoAnswer`` past ``timeout`` seconds, after cancelling it."""
    future = asyncio.run_coroutine_threadsafe(coro, _loop())
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise NoAnswer(f"no answer within {timeout:g}s") from None


def _loop() -> asyncio.AbstractEventLoop:
    with _lock:
        loop = _loops.get(os.getpid())
        if loop is None:
            _loops.clear()  # a parent's loop, inherited through fork: its thread is not here
            loop = _loops[os.getpid()] = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="covey-mcp", daemon=True).start()
        return loop
