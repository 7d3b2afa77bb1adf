"""What a Redis broker's queue holds: kombu keeps it as a list per priority level
(``covey.config.priorities``), popped most urgent first, each list oldest first."""

from __future__ import annotations

import redis

from covey.config import priorities


def queued(broker: redis.Redis, queue: str) -> list[str]:
    """The queue's messages in the order a worker takes them."""
    return [raw for listed in priorities.lists(queue) for raw in broker.lrange(listed, 0, -1)[::-1]]


def queue_length(broker: redis.Redis, queue: str) -> int:
    return sum(broker.llen(listed) for listed in priorities.lists(queue))


def empty(broker: redis.Redis, queue: str) -> None:
    broker.delete(*priorities.lists(queue))
