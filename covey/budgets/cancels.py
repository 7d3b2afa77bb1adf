"""Cancelling: a whole job, or agents their parent cancelled. The one place for both.

A cancel is a mark, not a message: an agent may be queued, running or waiting on
children of its own, and each ends at its next step, when it finds its job, itself
or an ancestor marked. Two marks per job: a flag for the job (``covey cancel``,
``JobHandle.cancel``, a sweep's cancel) and a set of the agents their parents
cancelled (a strategy's ``Cancel``; a parent that ended while children it joined
as each finished still ran). A step reads both in one round trip (``stopped``),
and the ledger's reservation checks both in its script (``reserve.lua``, given
``keys``), so no model call starts for a cancelled agent.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

from covey import keys as key_names

JOB_CANCELLED = "job cancelled"


def by_parent(stopped: str, agent_id: str) -> str:
    """Why agent ``agent_id`` ends when ``stopped`` (itself, or one of its ancestors) was cancelled by its parent."""
    whose = "it was" if stopped == agent_id else f"agent {stopped} was"
    return f"{whose} cancelled by its parent"


def keys(job_id: str) -> list[str]:
    """The job's two marks: its flag, and the set of agents their parents cancelled."""
    return [key_names.cancel(job_id), key_names.stopped(job_id)]


class Cancels:
    def __init__(self, client: redis.Redis, job_ttl: int) -> None:
        self._redis, self._job_ttl = client, job_ttl

    def cancel_job(self, job_id: str) -> None:
        self._redis.set(key_names.cancel(job_id), 1, ex=self._job_ttl)

    def job_cancelled(self, job_id: str) -> bool:
        return bool(self._redis.exists(key_names.cancel(job_id)))

    def cancel_agents(self, job_id: str, agent_ids: Sequence[str]) -> None:
        """Mark ``agent_ids`` cancelled by their parent: each, and its subtree, ends at its next step."""
        if not agent_ids:
            return
        key = key_names.stopped(job_id)
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.sadd(key, *agent_ids)
            pipe.expire(key, self._job_ttl)
            pipe.execute()

    def stopped(self, job_id: str, chain: Sequence[str]) -> str | None:
        """Why the last agent of ``chain`` (root first) must stop, if it must: its job
        was cancelled, or it or an ancestor was cancelled by its parent."""
        with self._redis.pipeline(transaction=False) as pipe:
            pipe.exists(key_names.cancel(job_id))
            pipe.smismember(key_names.stopped(job_id), list(chain))
            flagged, marked = pipe.execute()
        if flagged:
            return JOB_CANCELLED
        stopped = next((agent_id for agent_id, hit in zip(chain, marked) if hit), None)
        return None if stopped is None else by_parent(stopped, chain[-1])
