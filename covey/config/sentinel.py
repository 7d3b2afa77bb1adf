"""Sentinel URLs, spelled as kombu and Celery spell them, for covey's own client too.

``sentinel://[:password@]host:port[/db];sentinel://host:port;...`` names the
sentinels that watch a master; the master's name is ``COVEY_REDIS_MASTER``
(kombu's and Celery's ``master_name`` transport option). The password and db of
the first address are the master's, as in kombu and Celery; the sentinels
themselves are reached without one.

A client asks the sentinels for the master before each new connection, so after
a failover its next connection reaches the promoted replica. A connection still
open to a demoted master answers writes with READONLY; redis-py's Sentinel
connection turns that into a ``ConnectionError`` and drops the connection, so a
failover is, to every caller, an outage that ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import redis
from redis.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool, SentinelManagedConnection

from covey.config.pools import BlockingPool, Pool

SCHEME = "sentinel"
SEPARATOR = ";"
DEFAULT_PORT = 26379  # a sentinel's port, as kombu defaults it


def is_sentinel(url: str) -> bool:
    return url.partition("://")[0] == SCHEME


@dataclass(frozen=True)
class SentinelURL:
    """The sentinels' addresses, and how to log in to the master they name."""

    hosts: tuple[tuple[str, int], ...]
    db: int = 0
    username: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> SentinelURL:
        """``ValueError`` in one line naming the address that is not a sentinel's."""
        hosts: list[tuple[str, int]] = []
        first = None
        for chunk in url.split(SEPARATOR):
            if not chunk.strip():
                continue
            where = urlsplit(chunk.strip())
            try:
                port = where.port or DEFAULT_PORT
            except ValueError:
                port = None
            if where.scheme != SCHEME or not where.hostname or port is None:
                raise ValueError(
                    f"{chunk!r} is not a sentinel address: write sentinel://host:port, several joined by {SEPARATOR!r}"
                )
            hosts.append((where.hostname, port))
            first = first or where
        if first is None:
            raise ValueError(f"{url!r} names no sentinel: write sentinel://host:port;sentinel://host:port")
        db = first.path.strip("/")
        if db and not db.isdigit():
            raise ValueError(f"{url!r}: the database after the first sentinel's address must be a number, not {db!r}")
        return cls(
            hosts=tuple(hosts),
            db=int(db or 0),
            username=unquote(first.username) if first.username else None,
            password=unquote(first.password) if first.password else None,
        )


class FollowingConnection(SentinelManagedConnection):
    """A master's connection that asks the sentinels where the master is each time it
    connects. redis-py's asks only on a connection's first connect: one dropped
    mid-command and retried (as covey retries every command through an outage)
    reconnects to the address it had, the old master, which answers READONLY once
    it is back as a replica, for good (redis-py issue #3874)."""

    def connect_check_health(self, check_health: bool = True, retry_socket_connect: bool = True) -> None:
        if self._sock is None and self.connection_pool.is_master:
            self.host, self.port = self.connection_pool.get_master_address()
        super().connect_check_health(check_health=check_health, retry_socket_connect=retry_socket_connect)


class Sentinels(Sentinel):
    """redis-py's ``Sentinel``, whose "no master" error is one line naming the
    sentinels asked (redis-py's spells out each client's connection settings)."""

    def discover_master(self, service_name):
        try:
            return super().discover_master(service_name)
        except MasterNotFoundError:
            asked = ", ".join("{host}:{port}".format_map(s.connection_pool.connection_kwargs) for s in self.sentinels)
            raise MasterNotFoundError(
                f"no sentinel of {asked} names a live master {service_name!r} (sentinels down, the master "
                "down and not yet replaced, or another name: COVEY_REDIS_MASTER)"
            ) from None


class SentinelPool(SentinelConnectionPool, Pool):
    """redis-py's Sentinel pool, on covey's pool (``covey.config.pools``)."""


class BlockingSentinelPool(SentinelConnectionPool, BlockingPool):
    """A Sentinel pool that makes a caller beyond its connections wait for a free
    one (``timeout`` seconds), as covey's pools do, instead of failing it."""


def master(url: str, name: str, sentinel_options: dict, blocking: bool = False, **options) -> redis.Redis:
    """A client of master ``name`` as the sentinels at ``url`` see it now and after
    any failover. ``sentinel_options``: how to reach the sentinels (timeouts);
    ``options``: the master's connections (a pool's, with ``blocking``)."""
    where = SentinelURL.parse(url)
    sentinels = Sentinels(list(where.hosts), sentinel_kwargs=sentinel_options)
    login = {k: v for k, v in (("username", where.username), ("password", where.password)) if v}
    pool = BlockingSentinelPool if blocking else SentinelPool
    return sentinels.master_for(
        name, connection_pool_class=pool, connection_class=FollowingConnection, db=where.db, **login, **options
    )
