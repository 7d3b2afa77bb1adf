"""The jobs covey clients submitted: each one's spec as sent, and an index by time.

``covey jobs`` lists from the index and ``covey retry`` sends a recorded spec
again. Both live as long as a job's other records (the job TTL): the index is
trimmed of older members at every submit, so it never grows past the jobs of one
TTL's span.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from covey import keys

PAGE = 200  # job ids read from the index per round trip


@dataclass(frozen=True)
class Submission:
    job_id: str
    spec: dict[str, Any]  # the spec's wire form, as it was sent
    at: float  # epoch seconds


class JobIndex:
    def __init__(self, client: redis.Redis, job_ttl: int) -> None:
        self.redis, self.job_ttl = client, job_ttl

    def record(self, jobs: Sequence[tuple[str, dict[str, Any]]], at: float) -> None:
        """Note jobs just sent, as (job id, spec): each one's spec, and its place in the
        index (one round trip, no transaction: the keys sit in different Redis Cluster slots)."""
        with self.redis.pipeline(transaction=False) as pipe:
            for job_id, spec in jobs:
                pipe.set(keys.submitted(job_id), json.dumps({"spec": spec, "at": at}), ex=self.job_ttl)
            pipe.zadd(keys.jobs(), {job_id: at for job_id, _ in jobs})
            pipe.zremrangebyscore(keys.jobs(), "-inf", f"({at - self.job_ttl}")
            pipe.expire(keys.jobs(), self.job_ttl)
            pipe.execute()

    def newest(self) -> Iterator[str]:
        """Job ids, newest first, while their records live."""
        start = 0
        while True:
            page = self.redis.zrevrange(keys.jobs(), start, start + PAGE - 1)
            yield from (_text(job_id) for job_id in page)
            if len(page) < PAGE:
                return
            start += PAGE

    def submission(self, job_id: str) -> Submission | None:
        """The job's recorded spec, or None (unknown, expired, or sent by another Celery client)."""
        raw = self.redis.get(keys.submitted(job_id))
        try:
            found = json.loads(raw) if raw is not None else None
        except ValueError:
            return None
        if not isinstance(found, dict) or not isinstance(found.get("spec"), dict):
            return None
        return Submission(job_id, found["spec"], float(found.get("at", 0)))


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
