"""kombu's Redis transport, building one Redis client per channel instead of one per command.

kombu's Redis channel builds a new ``redis.Redis`` for each ack, each message
it marks unacknowledged and each publish; redis-py's constructor copies its
table of reply callbacks every time, which py-spy showed as about 6% of a worker's
CPU. A client only borrows connections from its pool per command, so one client
per pool serves every thread. Only a plain ``redis://`` broker takes this
transport: ``rediss://`` and RabbitMQ keep kombu's own.
"""

from __future__ import annotations

from kombu.transport import redis as kombu_redis

SCHEME = "redis"


class Channel(kombu_redis.Channel):
    _client = None

    def _create_client(self, asynchronous=False):
        if asynchronous:
            return super()._create_client(asynchronous=True)
        pool = self.pool  # a fresh pool after a reconnect: a fresh client for it
        if self._client is None or self._client.connection_pool is not pool:
            self._client = super()._create_client()
        return self._client


class Transport(kombu_redis.Transport):
    Channel = Channel


def transport(url: str) -> str | None:
    """The ``broker_transport`` setting for a broker at ``url``: this transport for
    ``redis://``, else None (the URL's scheme picks kombu's)."""
    return f"{__name__}:Transport" if url.partition("://")[0] == SCHEME else None
