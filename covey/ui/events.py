"""A job's events over HTTP: ``GET /jobs/{job_id}/events`` as Server-Sent Events.

Each event is one SSE message: its ``id`` the event's id, its ``event`` the event's
type, its ``data`` the event as ``covey events --json`` prints it. The stream
ends after ``job.finished`` (or with the job, for one that ends without it). A
client that reconnects sends ``Last-Event-ID`` (a browser's ``EventSource`` does
so itself) and is sent the events after it; ``?after=ID`` does the same for a
first connection. Each read of Redis waits in a thread of the server's own pool,
never in the event loop, and holds no worker slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from covey.client import Client
from covey.client.errors import UnknownJob
from covey.client.events import UnknownEvent
from covey.errors import CoveyError

PING_SECONDS = 15  # a comment line this often keeps proxies from closing an idle stream
READERS = 64  # followers read at once; more wait for a thread

T = TypeVar("T")


class JobEvents:
    """The endpoint, over one client and one pool of reading threads."""

    def __init__(self, client: Client, readers: int = READERS) -> None:
        self._client = client
        self._pool = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="covey-ui-events")

    async def respond(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        after = request.headers.get("last-event-id") or request.query_params.get("after")
        try:
            events = await self._run(self._client.job(job_id).events, after, True)
        except (UnknownJob, UnknownEvent) as e:
            return JSONResponse({"error": str(e)}, status_code=404)
        except ValueError as e:  # an id that is no event id
            return JSONResponse({"error": str(e)}, status_code=400)
        return EventSourceResponse(self._stream(events), ping=PING_SECONDS)

    async def _stream(self, events: Any) -> AsyncIterator[dict[str, str]]:
        try:
            while (event := await self._run(next, events, None)) is not None:
                yield {"id": event.id, "event": event.type.value, "data": event.model_dump_json(exclude_none=True)}
        except CoveyError as e:  # Redis away past the allowance: say so, and end
            yield {"event": "error", "data": str(e)}

    async def _run(self, call: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, call, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
