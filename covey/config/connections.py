"""How a worker connects to Redis: through an outage, and never past its pool.

A Redis restart or a cut link must cost a step a wait, not its work. Every
command is retried with capped backoff until Redis answers again or
``COVEY_REDIS_OUTAGE_SECONDS`` have passed; only then does the error reach the
step. Retrying is safe because covey's writes are idempotent: reservations and
settlements by id, checkpoints by step, tree nodes by overwrite, so a command
retried after its reply was lost counts once. Socket timeouts and keepalives
notice a link that went silent, where a read would otherwise wait forever.

A pool holds a connection per worker slot (and a few for the worker's own
threads); a caller beyond that waits for a free one instead of failing.

Every covey client of Redis is built here (``client``, ``patient_client``), from
a ``redis://`` URL or a Sentinel one (``covey.config.sentinel``): a failover is
an outage like any other, waited out until the promoted replica answers.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from covey.config import sentinel
from covey.config.pools import BlockingPool, Pool

T = TypeVar("T")

SOCKET_TIMEOUT_SECONDS = 10.0  # no covey command blocks: a reply this late means a dead link
# The broker's pop of a message is not acknowledged by Redis: a reply in flight when
# its link goes silent is lost if the worker gives up on the socket, and delivered
# if it waits for TCP to retransmit once the link is back. So the broker's sockets
# wait this long, past any partition TCP recovers from, before a link counts as dead.
BROKER_SOCKET_TIMEOUT_SECONDS = 120.0
CONNECT_TIMEOUT_SECONDS = 5.0
HEALTH_CHECK_SECONDS = 10  # a connection idle this long is pinged before use
BACKOFF_CAP_SECONDS = 1.0  # so work resumes within a second or so of Redis answering
POOL_MARGIN = 4  # connections beyond the slots: heartbeats, signals, the worker's own threads


class PatientRetry(Retry):
    """``Retry`` bounded by time, not by count: an outage of any shape is waited
    out for the same number of seconds."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            ExponentialBackoff(cap=BACKOFF_CAP_SECONDS, base=0.05),
            retries=-1,
            # READONLY: a master demoted by a failover, reached by an address that
            # did not follow it (a DNS name, a proxy); Sentinel clients reconnect themselves.
            supported_errors=(redis.ConnectionError, redis.TimeoutError, socket.timeout, redis.ReadOnlyError),
        )
        self.seconds = seconds

    def call_with_retry(
        self, do: Callable[[], T], fail: Callable[..., Any], is_retryable=None, with_failure_count: bool = False
    ) -> T:
        give_up = time.monotonic() + self.seconds
        failures = 0
        self._backoff.reset()
        while True:
            try:
                return do()
            except self._supported_errors as error:
                if is_retryable and not is_retryable(error):
                    raise
                failures += 1
                fail(error, failures) if with_failure_count else fail(error)
                pause = self._backoff.compute(failures)
                if time.monotonic() + pause > give_up:
                    if isinstance(error, redis.ReadOnlyError):  # to its caller an outage, not a failed command
                        raise redis.ConnectionError(f"Redis is a read-only replica: {error}") from error
                    raise
                time.sleep(pause)

    def __deepcopy__(self, memo: dict) -> PatientRetry:  # redis-py copies it into every connection
        return PatientRetry(self.seconds)


def pool_size(slots: int) -> int:
    """Connections a pool holds for a process with ``slots`` concurrent tasks."""
    return slots + POOL_MARGIN


def options(slots: int, outage_seconds: float) -> dict[str, Any]:
    """Connection-pool keyword arguments for a process with ``slots`` concurrent tasks."""
    return {
        "max_connections": pool_size(slots),
        "timeout": outage_seconds,  # BlockingConnectionPool: how long a caller waits for a free connection
        "socket_timeout": SOCKET_TIMEOUT_SECONDS,
        "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "socket_keepalive": True,
        "health_check_interval": HEALTH_CHECK_SECONDS,
        "retry": PatientRetry(outage_seconds),
    }


def sentinel_options() -> dict[str, Any]:
    """How a client reaches the sentinels: a silent one is given up on, and the next asked."""
    return {"socket_timeout": CONNECT_TIMEOUT_SECONDS, "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS}


def client(url: str, master: str | None, **kwargs: Any) -> redis.Redis:
    """A client of the Redis at ``url``; for a ``sentinel://`` URL, of the master
    the sentinels call ``master`` (``COVEY_REDIS_MASTER``), wherever it is now."""
    if not sentinel.is_sentinel(url):
        redis_client = redis.Redis(connection_pool=Pool.from_url(url, **kwargs))
        redis_client.auto_close_connection_pool = True  # as redis.Redis.from_url leaves it: close() closes the pool
        return redis_client
    if not master:
        raise ValueError(f"{url!r} is a Sentinel URL: set COVEY_REDIS_MASTER to the name its sentinels monitor")
    return sentinel.master(url, master, sentinel_options(), **kwargs)


def patient_client(url: str, slots: int, outage_seconds: float, master: str | None = None) -> redis.Redis:
    """A client for a worker process: ``decode_responses``, one pool sized to its slots."""
    opts = options(slots, outage_seconds)
    if sentinel.is_sentinel(url):
        return client(url, master, blocking=True, decode_responses=True, **opts)
    pool = BlockingPool.from_url(url, decode_responses=True, **opts)
    return redis.Redis(connection_pool=pool)
