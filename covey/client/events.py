"""A job's events read by a client, once or followed while the job runs.

Following ends with the job's last event (``job.finished``); a job that ends
without one (refused before its root ran, or whose records are gone) ends the
follow once the job says it has ended, after whatever events it wrote are read.
Each read blocks a few seconds at most (``covey.store.events``), and a Redis
away meanwhile is waited out as a result's wait does (``covey.client.outages``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from covey.client.errors import REDIS, JobTimeout, UnknownJob
from covey.client.outages import Outage, Waiting
from covey.errors import CoveyError
from covey.events import JobEvent
from covey.status import JobStatus
from covey.store.events import BATCH, BLOCK_SECONDS, EVENT_ID

if TYPE_CHECKING:
    from covey.client import JobHandle

T = TypeVar("T")


class UnknownEvent(CoveyError, LookupError):
    """An event id to resume after that the job's stream does not hold."""

    def __init__(self, job_id: str, event_id: str) -> None:
        self.job_id, self.event_id = job_id, event_id
        super().__init__(f"job {job_id} has no event {event_id} (its events: covey events {job_id})")


def events(
    handle: JobHandle,
    after: str | None = None,
    follow: bool = False,
    timeout: float | None = None,
    waiting: Waiting | None = None,
) -> Iterator[JobEvent]:
    """The events, read as the caller iterates; an unknown job or ``after`` raises at once."""
    read = _Reader(handle, Outage(handle._client.settings.redis_outage_seconds, waiting))
    return _reading(handle, read, _start(handle, after, read), follow, timeout)


def _reading(handle: JobHandle, read: _Reader, last: str, follow: bool, timeout: float | None) -> Iterator[JobEvent]:
    stream = handle._client.events
    started = time.monotonic()
    while True:
        waited = time.monotonic() - started
        block = None
        if follow:
            block = BLOCK_SECONDS if timeout is None else max(0.001, min(timeout - waited, BLOCK_SECONDS))
        batch = read(stream.after, handle.id, last, block)
        for event in batch:
            last = event.id
            yield event
            if event.final:
                return
        if len(batch) == BATCH:
            continue
        if not follow:
            return
        if not batch and _ended(handle):
            yield from read(stream.after, handle.id, last)
            return
        waited = time.monotonic() - started
        if timeout is not None and waited >= timeout:
            raise JobTimeout(handle.id, waited, handle._diagnosis())


class _Reader:
    """Runs a read of the job's stream, waiting out a Redis that is away."""

    def __init__(self, handle: JobHandle, outage: Outage) -> None:
        self._handle, self._outage = handle, outage

    def __call__(self, read: Callable[..., T], *args: Any) -> T:
        def attempt() -> T:
            with self._handle._client._reaching(REDIS):
                return read(*args)

        return self._outage.ride(attempt)


def _start(handle: JobHandle, after: str | None, read: _Reader) -> str:
    """The stream id to read after: checked against the job's stream."""
    stream = handle._client.events
    if after is None:
        if not read(stream.any, handle.id) and handle.status() is JobStatus.UNKNOWN:
            raise UnknownJob(handle.id, "no events recorded")
        return "0"
    if not EVENT_ID.match(after):
        raise ValueError(f"{after!r} is not an event id: event ids read like 1765000000000-0")
    if not read(stream.has, handle.id, after):
        raise UnknownEvent(handle.id, after)
    return after


def _ended(handle: JobHandle) -> bool:
    """Whether the job will write no more events: it ended, was refused, or is gone."""
    status = handle.status()
    return status.final or status is JobStatus.UNKNOWN
