"""kombu's Redis transport, building one Redis client per channel instead of one per command.

kombu's Redis channel builds a new ``redis.Redis`` for each ack, each message
it marks unacknowledged and each publish; redis-py's constructor copies its
table of reply callbacks every time, which py-spy showed as about 6% of a worker's
CPU. A client only borrows connections from its pool per command, so one client
per pool serves every thread. A plain ``redis://`` broker takes this transport,
a ``sentinel://`` one its Sentinel twin (kombu's Sentinel channel, with the same
changes); ``rediss://`` and RabbitMQ keep kombu's own.

Its connections pack commands as covey's own do (``covey.config.pools``).

It also names the broker by its URL (``redis://host:port/db``) wherever kombu
names a connection, where kombu's own name is this class's path with a fake
password.

It also keeps a Redis restart from killing the worker (kombu issue #582): when
the consumer's connection drops, kombu closes its channels, and closing one gives
its unacknowledged messages back through a fresh pool, built from the settings of
a connection that is already closed (``AttributeError`` on ``None``). That error
is no connection error, so it escaped kombu's close path and Celery stopped the
worker with exit code 0. Here it is a connection error, which the close path
ignores: the worker reconnects, and the messages stay in Redis's unacknowledged
set until a worker restores them.

Its QoS records which worker process holds each delivery (``covey.config.holder``),
in the transaction that records the delivery as unacknowledged and in the one
that acknowledges it, so a dead process's deliveries are known the moment its
heartbeat lapses. When the broker connection drops, kombu gives a closing
channel's deliveries back, and Celery forgets those it had not started; with Redis
away the give-back fails, and the deliveries would wait for the visibility timeout
(minutes) under a live holder, whose heartbeat keeps every other worker off them.
They are the holder's orphans instead, which its heartbeat puts back once Redis
answers; so is a delivery whose record was written with Redis going away, its
reply lost.
"""

from __future__ import annotations

import time

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.json import dumps
from redis.exceptions import ConnectionError as RedisConnectionError

from covey import keys
from covey.config import faults, holder, sentinel, unreadable
from covey.config.pools import packing

SCHEMES = {"redis": "Transport", "sentinel": "SentinelTransport"}
DEFAULT_PORT = 6379


class QoS(kombu_redis.QoS):
    def append(self, message, delivery_tag):
        # kombu's append, with the holder's set written in the same transaction.
        me, delivery = holder.current(), message.delivery_info
        record = dumps([message._raw, delivery["exchange"], delivery["routing_key"]])
        held = keys.worker_held(me.id)
        try:
            with self.pipe_or_acquire() as pipe:
                pipe.zadd(self.unacked_index_key, {delivery_tag: time.time()}).hset(
                    self.unacked_key, delivery_tag, record
                ).sadd(held, delivery_tag).expire(held, int(self.visibility_timeout)).execute()
        except self.channel.connection_errors:
            # The transaction may have applied with its reply lost as Redis went away:
            # Celery never sees this delivery, yet it would stand held by this live
            # process until the visibility timeout. An orphan, put back once Redis answers.
            me.orphaned([delivery_tag])
            raise
        me.delivered(delivery_tag)
        virtual.QoS.append(self, message, delivery_tag)  # the in-memory record; kombu's Redis one is above

    def restore_unacked(self, client=None):
        # At a channel's close; kombu's stops at the first delivery it fails to give back.
        try:
            super().restore_unacked(client)
        except self.channel.connection_errors:
            holder.current().orphaned(self._delivered)
            self._delivered.clear()

    def _remove_from_indices(self, delivery_tag, pipe=None):
        # An ack, a reject, a restore: the delivery is no longer this process's.
        me = holder.current()
        me.done(delivery_tag)
        return super()._remove_from_indices(delivery_tag, pipe).srem(keys.worker_held(me.id), delivery_tag)


class Channel(kombu_redis.Channel):
    QoS = QoS
    _client = None

    def _brpop_read(self, **options):
        # kombu parses a popped entry before it delivers it: an entry that is no JSON
        # raised out of the consumer and stopped the worker (covey.config.unreadable).
        popped = self.connection.delivered
        try:
            return super()._brpop_read(**options)
        except (ValueError, RecursionError) as e:
            if self.connection.delivered != popped:  # raised past the parse, by whatever ran the delivery
                raise
            queues = ", ".join(repr(q) for q in self._active_queues)
            unreadable.drop(None, f"the queues {queues}", f"not JSON ({type(e).__name__}: {e})")
            return False

    def _create_client(self, asynchronous=False):
        if asynchronous:
            return super()._create_client(asynchronous=True)
        pool = self.pool  # a fresh pool after a reconnect: a fresh client for it
        if self._client is None or self._client.connection_pool is not pool:
            self._client = super()._create_client()
        return self._client

    def _connparams(self, asynchronous=False):
        if self.connection is None or self.connection.client is None:
            raise RedisConnectionError("the channel's broker connection is closed")
        return packing(super()._connparams(asynchronous=asynchronous))


class SentinelChannel(Channel, kombu_redis.SentinelChannel):
    """kombu's Sentinel channel with covey's changes, on connections that follow a
    failover when they reconnect (``covey.config.sentinel.FollowingConnection``)."""

    connection_class = sentinel.FollowingConnection


class Transport(kombu_redis.Transport):
    Channel = Channel
    scheme = "redis"  # as its URL is spelt
    delivered = 0  # entries parsed and handed to ``_deliver``: tells a parse's error from a delivery's

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # kombu names a connection (Celery's banner, its "Connected to" line) by
        # this class's path with a "**" password even when there is none; an
        # instance that says it parses URLs is asked for its own name instead
        # (``as_uri``). The class still says it does not, so kombu parses the URL.
        self.can_parse_url = True

    def as_uri(self, uri: str, include_password: bool = False, mask: str = "**") -> str:
        """The broker's URL as a person may read it: its password masked, and only if it has one."""
        c = self.client
        if c is None:  # a transport not made for a connection: kombu's own naming
            raise NotImplementedError
        password = (c.password if include_password else mask) if c.password else ""
        auth = f"{c.userid or ''}:{password}@" if password else (f"{c.userid}@" if c.userid else "")
        db = (c.virtual_host or "").strip("/") or 0  # "/" after a failover's switch re-parsed a URL without one
        return f"{self.scheme}://{auth}{c.hostname}:{c.port or DEFAULT_PORT}/{db}"

    def _deliver(self, message, queue):
        self.delivered += 1
        why = unreadable.why(message)
        if why is not None:  # kombu would raise making a message of it, and stop the worker
            unreadable.drop(message, f"queue {queue!r}", why)
            return None
        # The pop has returned; the delivery is recorded as unacknowledged only in
        # what follows: a worker killed here loses the message (the outbox does not).
        if "task" in (message.get("headers") or {}):  # a task's message, not a broadcast or an event
            faults.at("after_pop")
        return super()._deliver(message, queue)


class SentinelTransport(Transport, kombu_redis.SentinelTransport):
    Channel = SentinelChannel
    scheme = "sentinel"


def transport(url: str) -> str | None:
    """The ``broker_transport`` setting for a broker at ``url``: these transports for
    ``redis://`` and ``sentinel://``, else None (the URL's scheme picks kombu's)."""
    name = SCHEMES.get(url.partition("://")[0])
    return f"{__name__}:{name}" if name else None
