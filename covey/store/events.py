"""Reads a job's events (``covey.events``), which the worker's scripts append, and
appends those that report no state (``add``: a streamed reply's text).

Reading never holds a worker slot: it is a plain read of the job's stream, or a
read that blocks on it for new events (``XREAD BLOCK``), at most
``BLOCK_SECONDS`` at a time, well inside the client's socket timeout.
"""

from __future__ import annotations

import re

import redis

from covey import keys
from covey.events import JobEvent

BLOCK_SECONDS = 2.0
BATCH = 500  # events read per round trip
EVENT_ID = re.compile(r"^\d{1,20}(-\d{1,20})?$")  # a stream id, as Redis gives it: milliseconds-sequence


class EventStream:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def after(self, job_id: str, after: str = "0", block: float | None = None) -> list[JobEvent]:
        """The job's events after event ``after`` ("0": from the first), up to a batch;
        with ``block``, waits up to that many seconds (at most ``BLOCK_SECONDS``) for
        one when there is none yet."""
        wait = None if block is None else max(1, int(min(block, BLOCK_SECONDS) * 1000))
        reply = self._redis.xread({keys.events(job_id): after}, count=BATCH, block=wait)
        return [
            JobEvent.loads(_text(event_id), _text(fields["e"]))
            for _, entries in reply or []
            for event_id, fields in entries
        ]

    def add(self, job_id: str, event: JobEvent, ttl: int) -> None:
        """Append ``event``, and keep the stream ``ttl`` seconds from now."""
        with self._redis.pipeline(transaction=False) as pipe:
            pipe.xadd(keys.events(job_id), {"e": event.dumps()})
            pipe.expire(keys.events(job_id), ttl)
            pipe.execute()

    def has(self, job_id: str, event_id: str) -> bool:
        """Whether the job's stream holds event ``event_id``."""
        return bool(self._redis.xrange(keys.events(job_id), min=event_id, max=event_id, count=1))

    def last(self, job_id: str) -> str | None:
        """The id of the job's newest event (None before its first): a page drawn
        from the job's records follows the events after it."""
        newest = self._redis.xrevrange(keys.events(job_id), count=1)
        return _text(newest[0][0]) if newest else None

    def any(self, job_id: str) -> bool:
        return bool(self._redis.exists(keys.events(job_id)))


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
