"""Celery's Redis result store, on a pool that waits out an outage (``covey.config.connections``).

A root's result is stored here under the job id, and a client waits on it; a
write lost to a Redis restart would leave the client waiting for good, so its
commands get the same patient retries and slot-sized pool as the worker's own
Redis client. A result is stored in one atomic round trip (``lua/store_result.lua``).
"""

from __future__ import annotations

from functools import cached_property
from importlib.resources import files
from typing import Any

from celery import states
from celery.backends.redis import RedisBackend, SentinelBackend
from celery.exceptions import BackendStoreError
from kombu.utils.encoding import bytes_to_str

from covey.config import connections, sentinel
from covey.config.pools import BlockingPool
from covey.redis_scripts import ScriptCall

BACKENDS = {"redis": "PatientRedisBackend", "rediss": "PatientRedisBackend", "sentinel": "PatientSentinelBackend"}

_STORE = (files("covey.config") / "lua" / "store_result.lua").read_text(encoding="utf-8")
_GUARD = (files("covey.config") / "lua" / "store_guard.lua").read_text(encoding="utf-8")


class OneTripRedisBackend(RedisBackend):
    """Celery's Redis result store, storing a result in one round trip.

    Celery GETs a task's stored meta before writing its result, so that a duplicate
    run cannot overwrite a stored success: a round trip more for every finished
    task, and a race in which two runs both read "no success yet" and the later
    write wins. Here the check and the write are one script, so neither.
    """

    def _store_result(self, task_id, result, state, traceback=None, request=None, **kwargs):
        if not self.one_trip:
            return super()._store_result(task_id, result, state, traceback, request, **kwargs)
        key, value, expires = self._encoded(task_id, result, state, traceback, request)
        self.ensure(self._store_script, ([key], [value, expires, key]))
        return result

    @property
    def one_trip(self) -> bool:
        """Whether a result is stored by script: it reads the stored meta as plain JSON."""
        return self.serializer == "json" and not self.compression

    def storing(self, task_id: str, result: Any, request: Any, only_if: tuple[str, str, str]) -> ScriptCall:
        """The script call that stores a successful ``result`` as ``_store_result``
        does, only while hash ``only_if[0]``'s field ``only_if[1]`` holds ``only_if[2]``,
        for a caller that runs it in the round trip writing that field (``one_trip`` only)."""
        key, value, expires = self._encoded(task_id, result, states.SUCCESS, None, request)
        return ScriptCall(self._guarded_script, [key, only_if[0]], [value, expires, key, only_if[1], only_if[2]])

    def _encoded(self, task_id, result, state, traceback, request) -> tuple[bytes, str, int | str]:
        """The key, Celery's encoded meta and its expiry ('' for none) that store ``result``,
        with Celery's size cap and a failure's own expiry."""
        meta = self._get_result_meta(result=result, state=state, traceback=traceback, request=request)
        meta["task_id"] = bytes_to_str(task_id)
        value = self.encode(meta)
        if len(value) > self._MAX_STR_VALUE_SIZE:
            raise BackendStoreError("value too large for Redis backend", state=state, task_id=task_id)
        expires = self.failure_expires if state == states.FAILURE else self.expires
        return self.get_key_for_task(task_id), value, expires or ""

    @cached_property
    def _store_script(self):
        return self.client.register_script(_STORE)

    @cached_property
    def _guarded_script(self):
        return self.client.register_script(_GUARD + _STORE)


class PatientRedisBackend(OneTripRedisBackend):
    def _get_pool(self, **params):
        outage = self.app.conf.covey_redis_outage_seconds
        params.update(timeout=outage, retry=connections.PatientRetry(outage))
        return BlockingPool(**params)


class PatientSentinelBackend(OneTripRedisBackend, SentinelBackend):
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
