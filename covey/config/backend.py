"""Celery's Redis result store, on a pool that waits out an outage (``covey.config.connections``).

A root's result is stored here under the job id, and a client waits on it; a
write lost to a Redis restart would leave the client waiting for good, so its
commands get the same patient retries and slot-sized pool as the worker's own
Redis client.
"""

from __future__ import annotations

import redis
from celery.backends.redis import RedisBackend

from covey.config import connections

REDIS_SCHEMES = ("redis", "rediss")


class PatientRedisBackend(RedisBackend):
    def _get_pool(self, **params):
        outage = self.app.conf.covey_redis_outage_seconds
        params.update(timeout=outage, retry=connections.PatientRetry(outage))
        return redis.BlockingConnectionPool(**params)


def patient(url: str) -> str:
    """The ``result_backend`` setting for ``url``: this backend for a Redis URL, else ``url``."""
    scheme = url.partition("://")[0]
    return f"{__name__}:PatientRedisBackend+{url}" if scheme in REDIS_SCHEMES else url
