"""Celery's Redis result store, on a pool that waits out an outage (``covey.config.connections``).

A root's result is stored here under the job id, and a client waits on it; a
write lost to a Redis restart would leave the client waiting for good, so its
commands get the same patient retries and slot-sized pool as the worker's own
Redis client.
"""

from __future__ import annotations

import redis
from celery.backends.redis import RedisBackend, SentinelBackend

from covey.config import connections, sentinel

BACKENDS = {"redis": "PatientRedisBackend", "rediss": "PatientRedisBackend", "sentinel": "PatientSentinelBackend"}


class PatientRedisBackend(RedisBackend):
    def _get_pool(self, **params):
        outage = self.app.conf.covey_redis_outage_seconds
        params.update(timeout=outage, retry=connections.PatientRetry(outage))
        return redis.BlockingConnectionPool(**params)


class PatientSentinelBackend(SentinelBackend):
    """Celery's Sentinel result store on the same patient, blocking pool: a failover
    is waited out like an outage, and the new master found through the sentinels."""

    def _get_pool(self, **params):
        outage = self.app.conf.covey_redis_outage_seconds
        params.update(timeout=outage, retry=connections.PatientRetry(outage))
        params.setdefault("connection_class", sentinel.FollowingConnection)  # rediss keeps Celery's SSL one
        hosts = params.pop("hosts")
        options = self._transport_options
        sentinels = sentinel.Sentinels(
            [(h["host"], h["port"]) for h in hosts], sentinel_kwargs=options.get("sentinel_kwargs"), **params
        )
        return sentinels.master_for(
            options.get("master_name"),
            redis_class=self._get_client(),
            connection_pool_class=sentinel.BlockingSentinelPool,
        ).connection_pool


def patient(url: str) -> str:
    """The ``result_backend`` setting for ``url``: a patient backend for a Redis or
    Sentinel URL, else ``url``."""
    name = BACKENDS.get(url.partition("://")[0])
    return f"{__name__}:{name}+{url}" if name else url
