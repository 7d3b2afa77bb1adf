"""A job's priority, and how each broker orders it.

covey has one meaning: a whole number from 0 to 9, 9 the most urgent; 0, the
default, is every job's that asks for none. The brokers count the other way
from each other, so a message's ``priority`` option is the job's priority as its
broker reads it:

- RabbitMQ serves higher numbers first, from queues declared with
  ``x-max-priority`` (``MOST_URGENT``): the priority as it is.
- kombu's Redis transport keeps a queue as one list per level of its
  ``priority_steps`` and pops the lowest level first: 9 minus the priority. The
  list of level 0 is the queue's own name, the others the name, kombu's ``sep``
  and the level (``lists``). A message sent with no priority, as a Celery client
  that passes none sends it, goes to level 0: ahead of every job but those of
  priority 9.
"""

from __future__ import annotations

LEAST_URGENT = 0  # a job's priority unless it asks for another
MOST_URGENT = 9  # the most a job may ask for, and RabbitMQ queues' x-max-priority
LEVELS = list(range(LEAST_URGENT, MOST_URGENT + 1))  # kombu's Redis priority_steps: a list for each


def on_broker(priority: int, redis_broker: bool) -> int:
    """The ``priority`` option of a job's message at ``priority``, as its broker orders it."""
    return MOST_URGENT - priority if redis_broker else priority


def lists(queue: str) -> list[str]:
    """The Redis lists kombu keeps ``queue``'s messages in, the most urgent first
    (a Redis broker with covey's ``priority_steps``)."""
    # Imported here: a job's spec reads this module, and kombu's Redis transport takes
    # the standard library's select at its import; a gevent worker must patch it first.
    from kombu.transport import redis as kombu_redis

    return [queue if level == 0 else f"{queue}{kombu_redis.Channel.sep}{level}" for level in LEVELS]
