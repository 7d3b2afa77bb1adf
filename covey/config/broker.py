"""kombu's Redis transport, building one Redis client per channel instead of one per command.

kombu's Redis channel builds a new ``redis.Redis`` for each ack, each message
it marks unacknowledged and each publish; redis-py's constructor copies its
table of reply callbacks every time, which py-spy showed as about 6% of a worker's
CPU. A client only borrows connections from its pool per command, so one client
per pool serves every thread. Only a plain ``redis://`` broker takes this
transport: ``rediss://`` and RabbitMQ keep kombu's own.

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
heartbeat lapses.
"""

from __future__ import annotations

import time

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.json import dumps
from redis.exceptions import ConnectionError as RedisConnectionError

from covey import keys
from covey.config import faults, holder

SCHEME = "redis"


class QoS(kombu_redis.QoS):
    def append(self, message, delivery_tag):
        # kombu's append, with the holder's set written in the same transaction.
        me, delivery = holder.current(), message.delivery_info
        record = dumps([message._raw, delivery["exchange"], delivery["routing_key"]])
        held = keys.worker_held(me.id)
        with self.pipe_or_acquire() as pipe:
            pipe.zadd(self.unacked_index_key, {delivery_tag: time.time()}).hset(
                self.unacked_key, delivery_tag, record
            ).sadd(held, delivery_tag).expire(held, int(self.visibility_timeout)).execute()
        me.delivered(delivery_tag)
        virtual.QoS.append(self, message, delivery_tag)  # the in-memory record; kombu's Redis one is above

    def _remove_from_indices(self, delivery_tag, pipe=None):
        # An ack, a reject, a restore: the delivery is no longer this process's.
        me = holder.current()
        me.done(delivery_tag)
        return super()._remove_from_indices(delivery_tag, pipe).srem(keys.worker_held(me.id), delivery_tag)


class Channel(kombu_redis.Channel):
    QoS = QoS
    _client = None

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
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel

    def _deliver(self, message, queue):
        # The pop has returned; the delivery is recorded as unacknowledged only in
        # what follows: a worker killed here loses the message (the outbox does not).
        if "task" in message.get("headers", {}):  # a task's message, not a broadcast or an event
            faults.at("after_pop")
        return super()._deliver(message, queue)


def transport(url: str) -> str | None:
    """The ``broker_transport`` setting for a broker at ``url``: this transport for
    ``redis://``, else None (the URL's scheme picks kombu's)."""
    return f"{__name__}:Transport" if url.partition("://")[0] == SCHEME else None
