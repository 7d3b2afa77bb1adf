"""Agents their parent cancelled (``Cancel``), and the check every step makes.

A cancel is a mark, not a message: the agent may be queued, running or waiting
on children of its own, and each of those ends at its next step, when it finds
itself or an ancestor marked. One set per job, so the check is one round trip
for the whole ancestor chain.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

from covey import keys


class Cancels:
    def __init__(self, client: redis.Redis, job_ttl: int) -> None:
        self._redis, self._job_ttl = client, job_ttl

    def cancel(self, job_id: str, agent_ids: Sequence[str]) -> None:
        if not agent_ids:
            return
        key = keys.stopped(job_id)
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.sadd(key, *agent_ids)
            pipe.expire(key, self._job_ttl)
            pipe.execute()

    def stopped(self, job_id: str, chain: Sequence[str]) -> str | None:
        """The first of ``chain`` (root first) that was cancelled, if one was."""
        marked = self._redis.smismember(keys.stopped(job_id), list(chain))
        return next((agent_id for agent_id, hit in zip(chain, marked) if hit), None)
