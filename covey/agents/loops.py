"""Run a coroutine to its end from covey's synchronous code: the SDK's run, an SDK tool.

A strategy and a tool are plain functions the worker calls in a thread of its
own; the Agents SDK is async. The coroutine gets an event loop of its own: in
this thread when none runs here (a prefork or threads pool), else in a helper
thread (a thread that already runs a loop). Under gevent (``covey worker --pool
gevent``) greenlets share one thread, and with it asyncio's running loop, and the
patched ``select`` has lost epoll: the coroutine runs in a native thread of
gevent's pool, on a loop that selects with the unpatched ``select`` and hands
blocking work (the SDK runs a sync tool with ``asyncio.to_thread``) to native
threads of gevent's, not to greenlets that a native thread cannot wait for.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import selectors
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """The result of the coroutine ``make`` returns, run on a loop of its own."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        import gevent

        native_select = monkey.get_original("select", "select")
        result: T = gevent.get_hub().threadpool.apply(_natively, (make, native_select))
        return result
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="covey-async") as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


def _natively(make: Callable[[], Coroutine[Any, Any, T]], native_select: Any) -> T:
    class NativeSelect(selectors.SelectSelector):
        _select = native_select  # a builtin: called as the class's own, not bound

    loop = asyncio.SelectorEventLoop(NativeSelect())
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(make())
    finally:  # as asyncio.run ends, but for waiting on the executor's threads (greenlets: this thread cannot)
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        asyncio.set_event_loop(None)
        loop.close()  # its executor shut down without a wait
