"""The broker deliveries this worker process holds, and whether any were taken from it.

kombu's Redis transport keeps each unacknowledged delivery in its ``unacked``
hash; which process holds one, it does not record. Each consumer process here
is a *holder*: the broker's QoS (``covey.config.broker``) adds a delivery's tag
to the holder's set in Redis in the same transaction as kombu's own record, and
takes it out with the ack. The holder's heartbeat (``covey.worker.heartbeat``)
tells the other workers it is alive; once it lapses, one of them puts the
holder's deliveries back on their queues (``covey.worker.takeover``).

A holder that was only slow (stopped, starved, cut off) learns at its next
heartbeat which of its deliveries were taken meanwhile (``taken``), and the step
running each one drops it. Until ``sure_until`` (its last heartbeat's TTL from
when it was sent) no one can have taken anything: the key stood the whole time.

A delivery kombu failed to give back when the broker connection dropped (Redis
was away) is an *orphan*: Celery has forgotten it, its records stay in Redis,
and this process's heartbeat keeps every other worker off it. The heartbeat puts
it back once Redis answers.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class Holder:
    id: str
    pid: int
    inflight: set[str] = field(default_factory=set)  # tags delivered here and not yet acknowledged
    taken: set[str] = field(default_factory=set)  # of those, the ones another worker put back
    orphans: set[str] = field(default_factory=set)  # of those, the ones kombu failed to give back
    sure_until: float = 0.0  # monotonic time before which nothing can have been taken
    lock: threading.Lock = field(default_factory=threading.Lock)

    def delivered(self, tag: str) -> None:
        self.inflight.add(tag)
        self.orphans.discard(tag)  # delivered again under its tag (the visibility timeout restored it)

    def done(self, tag: str) -> None:
        self.inflight.discard(tag)
        self.taken.discard(tag)

    def orphaned(self, tags: Iterable[str]) -> None:
        self.orphans.update(tags)

    def put_back(self, tags: list[str]) -> None:
        """Orphans ``tags`` are back on their queues: no longer this process's."""
        for tag in tags:
            self.done(tag)
            self.orphans.discard(tag)

    def renewed(self, sent_at: float, ttl: float, held: set[str] | None) -> set[str]:
        """Record a heartbeat sent at ``sent_at``; ``held`` is what Redis still holds for
        this process when the heartbeat had lapsed (None when it stood). Returns the
        tags found taken."""
        gone = set() if held is None else self.inflight - held
        self.taken |= gone
        self.sure_until = sent_at + ttl
        return gone

    def sure(self) -> bool:
        return time.monotonic() < self.sure_until


_current: Holder | None = None
_made = threading.Lock()


def current() -> Holder:
    """This process's holder, made on first use (a fork makes a new one: its pid differs)."""
    global _current
    with _made:
        if _current is None or _current.pid != os.getpid():
            _current = Holder(id=f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}", pid=os.getpid())
        return _current


def existing() -> Holder | None:
    """This process's holder if it has one: a process that consumes (or a prefork child, None)."""
    holder = _current
    return holder if holder is not None and holder.pid == os.getpid() else None
