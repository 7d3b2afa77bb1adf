"""What the Redis broker holds: queued messages, unacknowledged deliveries, and the
worker process holding each.

kombu's Redis transport keeps a queue as a list per priority level
(``covey.config.priorities``) and each delivery a worker has not acknowledged
in its ``unacked`` hash; covey's QoS records which worker
process (holder) holds each delivery, beside a heartbeat that says the process
is alive and, for a Celery worker, its node name (``covey.worker.heartbeat``).
These are reads of those records, shared by the workers' reconciler and
takeover and by the client's diagnosis of a job that does not move, which only
reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import redis
from kombu.utils.encoding import bytes_to_str

from covey import keys
from covey.config import priorities

UNACKED = "unacked"  # kombu's Redis transport: delivery tag -> [message, exchange, routing key]
UNACKED_INDEX = "unacked_index"  # kombu's Redis transport: delivery tag -> when delivered (epoch seconds)
SEP = " "  # between the fields of a heartbeat's value (a node name holds no space)
BEATS_PER_TTL = 6  # a worker beats this many times a heartbeat's TTL: it lapses only after as many missed
STALE_BEATS = 3  # a heartbeat not renewed for this many beats is no longer fresh


def _headers(raw: str, unacked: bool) -> dict[str, Any]:
    try:
        payload = json.loads(raw)
        return (payload[0] if unacked else payload).get("headers") or {}
    except (ValueError, AttributeError, IndexError, KeyError, TypeError):
        return {}


@dataclass(frozen=True)
class Copy:
    """A message in the broker: queued, or delivered and unacknowledged under ``tag``."""

    headers: dict[str, Any]
    tag: str | None = None


def in_broker(broker: redis.Redis, queues: Iterable[str]) -> dict[str, list[Copy]]:
    """Task id -> its messages queued on ``queues`` or unacknowledged, read at one instant."""
    with broker.pipeline(transaction=True) as pipe:
        for queue in queues:
            for listed in priorities.lists(queue):
                pipe.lrange(listed, 0, -1)
        pipe.hgetall(UNACKED)
        *queued, unacked = pipe.execute()
    copies = [Copy(_headers(raw, False)) for q in queued for raw in q]
    copies += [Copy(_headers(raw, True), bytes_to_str(tag)) for tag, raw in unacked.items()]
    found: dict[str, list[Copy]] = {}
    for copy in copies:
        found.setdefault(copy.headers.get("id", ""), []).append(copy)
    return found


def beat_value(token: str, ttl_ms: int, node: str) -> str:
    """What a holder's heartbeat key holds: its beat's token, the key's TTL and the
    Celery node of the worker that beats (empty for a process that runs no tasks)."""
    return f"{token}{SEP}{ttl_ms}{SEP}{node}"


@dataclass(frozen=True)
class Holder:
    """A worker process that holds (or held) deliveries, as its records stand."""

    id: str
    alive: bool  # its heartbeat stands
    fresh: bool  # and was renewed within the last few beats: the process still beats
    node: str | None  # its Celery node; None for a process that runs no tasks (or an older worker's)
    tags: frozenset[str]  # the deliveries it holds


def _holder(holder_id: str, beat: str | bytes | None, left_ms: int, tags: set[str]) -> Holder:
    """A holder from its heartbeat's value and milliseconds left (PTTL), and its held tags.
    A worker beats ``BEATS_PER_TTL`` times a TTL; one that missed ``STALE_BEATS`` in a
    row has died or hangs, though its key stands until its TTL runs out."""
    beat = None if beat is None else bytes_to_str(beat)
    _, ttl, node = beat.split(SEP, 2) if beat is not None and beat.count(SEP) >= 2 else ("", "", "")
    fresh = beat is not None and ttl.isdigit() and int(ttl) - left_ms < int(ttl) * STALE_BEATS / BEATS_PER_TTL
    return Holder(holder_id, beat is not None, fresh, node or None, frozenset(bytes_to_str(t) for t in tags))


def _ids(broker: redis.Redis) -> list[str]:
    return sorted(bytes_to_str(h) for h in broker.smembers(keys.workers()))


def holders(broker: redis.Redis) -> list[Holder]:
    """Every holder Redis records, with its heartbeat and deliveries (two round trips)."""
    ids = _ids(broker)
    with broker.pipeline(transaction=False) as pipe:
        for h in ids:
            pipe.get(keys.worker_alive(h)).pttl(keys.worker_alive(h)).smembers(keys.worker_held(h))
        replies = pipe.execute()
    return [_holder(h, *replies[3 * i : 3 * i + 3]) for i, h in enumerate(ids)]


def dead_holders(client: redis.Redis, me: str) -> list[str]:
    """The holders, other than ``me``, whose heartbeat has lapsed (their deliveries unread)."""
    ids = [h for h in _ids(client) if h != me]
    with client.pipeline(transaction=False) as pipe:
        for h in ids:
            pipe.exists(keys.worker_alive(h))
        alive = pipe.execute()
    return [h for h, up in zip(ids, alive) if not up]


def holder_of(client: redis.Redis, tag: str) -> tuple[str, bool] | None:
    """The holder that recorded delivery ``tag`` and whether its heartbeat stands, or
    None when no holder did (kombu's visibility timeout alone gives it back then)."""
    return next(((h.id, h.alive) for h in holders(client) if tag in h.tags), None)


def silent_workers(broker: redis.Redis, answered: set[str]) -> list[Holder]:
    """The workers that still beat but whose Celery node is not in ``answered`` (the
    nodes that answered a broadcast): busy enough to miss a broadcast's short wait,
    and not gone."""
    return [h for h in holders(broker) if h.fresh and h.node is not None and h.node not in answered]


def held_by_silent_workers(broker: redis.Redis, answered: set[str]) -> set[str]:
    """Ids of the tasks the ``silent_workers`` hold: they run them."""
    silent = silent_workers(broker, answered)
    tags = sorted(set().union(*(h.tags for h in silent))) if silent else []
    records = broker.hmget(UNACKED, tags) if tags else []
    return {_headers(bytes_to_str(r), True).get("id", "") for r in records if r is not None}
