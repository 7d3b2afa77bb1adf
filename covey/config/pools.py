"""The connection pools every covey client of Redis draws from.

redis-py's ``get_connection`` carries a deprecation wrapper that inspects each
call's arguments to warn of ones passed in redis-py 5.2 and before. redis-py
itself and covey pass none, yet the wrapper ran once per round trip: 3% of a
zero-latency sweep's worker time. These pools call the function under it.
"""

from __future__ import annotations

import inspect

import redis


class Pool(redis.ConnectionPool):
    """redis-py's pool (a caller beyond its connections is refused)."""

    get_connection = inspect.unwrap(redis.ConnectionPool.get_connection)


class BlockingPool(redis.BlockingConnectionPool):
    """redis-py's blocking pool (a caller beyond its connections waits for a free one)."""

    get_connection = inspect.unwrap(redis.BlockingConnectionPool.get_connection)
