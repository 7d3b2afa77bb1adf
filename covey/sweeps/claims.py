"""Claims: which job runs each unit of a sweep, so no unit runs twice at once.

Before submitting a unit a submitter claims it in Redis (one key per unit,
holding the job id, the submitter's id and, once recorded, the job's status).
Every submitter of a sweep holds a lease it renews while it runs. A unit claimed
by a live submitter is left to it; one claimed by a submitter whose lease lapsed
(killed) is adopted: the new submitter follows the same job rather than running
the sample again. Every change of a claim is a compare-and-set (WATCH), so two
submitters racing for a unit cannot both win; the records of one poll's
results are sent together, in one round trip.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from typing import Literal

import redis

from covey import keys, redis_scripts
from covey.sweeps.records import KEPT

_RECORD = (files("covey.sweeps") / "lua" / "record.lua").read_text(encoding="utf-8")

Mark = tuple[str, str, str]  # a unit, its job, the status it was recorded with


@dataclass(frozen=True)
class Take:
    """What ``Claims.take`` decided for a unit.

    ``new``: the caller claimed it for its new job; ``adopt``: it now follows
    ``job_id``, which a dead submitter started; ``busy``: a live submitter runs
    it; ``done``: another submitter recorded it as kept (see ``records.KEPT``)."""

    outcome: Literal["new", "adopt", "busy", "done"]
    job_id: str | None = None


class Claims:
    def __init__(self, client: redis.Redis, sweep_id: str, job_ttl: int, owner: str | None = None) -> None:
        self.redis, self.sweep_id, self.job_ttl = client, sweep_id, job_ttl
        self.owner = owner or uuid.uuid4().hex[:12]
        self._record = client.register_script(_RECORD)

    def renew(self) -> None:
        """Hold (or extend) this submitter's lease."""
        self.redis.set(keys.sweep_owner(self.sweep_id, self.owner), 1, ex=keys.SWEEP_OWNER_TTL_SECONDS)

    def release(self) -> None:
        """Give up the lease now: another submitter may adopt this one's units at once."""
        self.redis.delete(keys.sweep_owner(self.sweep_id, self.owner))

    def cancel(self) -> list[str]:
        """Mark the sweep cancelled (``covey sweep-cancel``); returns the jobs of its
        units not yet recorded, for the caller to cancel."""
        self.redis.set(keys.sweep_cancel(self.sweep_id), 1, ex=self.job_ttl)
        claimed = list(self.redis.scan_iter(match=keys.sweep_claim(self.sweep_id, "*"), count=1000))
        held = [json.loads(raw) for raw in self.redis.mget(claimed) if raw is not None] if claimed else []
        return [h["job"] for h in held if h["recorded"] is None]

    def cancelled(self) -> bool:
        return bool(self.redis.exists(keys.sweep_cancel(self.sweep_id)))

    def resume(self) -> None:
        """A rerun after a cancel goes on with the units not run."""
        self.redis.delete(keys.sweep_cancel(self.sweep_id))

    def take(self, unit: str, job_id: str) -> Take:
        return self.take_all([(unit, job_id)])[0]

    def take_all(self, asks: Sequence[tuple[str, str]]) -> list[Take]:
        """``take`` for each (unit, job id): the units no one claimed yet are claimed
        all in one round trip, the others looked at one by one."""
        with self.redis.pipeline(transaction=False) as pipe:
            for unit, job_id in asks:
                pipe.set(keys.sweep_claim(self.sweep_id, unit), self._mine(job_id), nx=True, ex=self.job_ttl)
            made = pipe.execute()
        return [Take("new", job_id) if ok else self._held(unit, job_id) for (unit, job_id), ok in zip(asks, made)]

    def _mine(self, job_id: str) -> str:
        return json.dumps({"job": job_id, "owner": self.owner, "recorded": None})

    def _held(self, unit: str, job_id: str) -> Take:
        """What to do with a unit another claim holds."""
        key, mine = keys.sweep_claim(self.sweep_id, unit), self._mine(job_id)
        raw = self.redis.get(key)
        if raw is None:  # expired between the two calls: try again next time
            return Take("busy")
        held = json.loads(raw)
        if held["recorded"] in KEPT:
            return Take("done", held["job"])
        if held["recorded"] is not None:  # an attempt that a rerun may repeat
            return Take("new", job_id) if self._swap(key, raw, mine) else Take("busy")
        if held["owner"] == self.owner or self.redis.exists(keys.sweep_owner(self.sweep_id, held["owner"])):
            return Take("busy")
        adopted = json.dumps({**held, "owner": self.owner})
        return Take("adopt", held["job"]) if self._swap(key, raw, adopted) else Take("busy")

    def record(self, *marks: Mark) -> None:
        """Mark each unit's job recorded with its status (only while the claim is still
        that job's), all in one round trip."""
        if not marks:
            return
        calls = [
            redis_scripts.ScriptCall(
                self._record,
                [keys.sweep_claim(self.sweep_id, unit)],
                [job_id, json.dumps({"job": job_id, "owner": self.owner, "recorded": status}), self.job_ttl],
            )
            for unit, job_id, status in marks
        ]
        redis_scripts.run(self.redis, calls)

    def _swap(self, key: str, old: str | bytes, new: str) -> bool:
        """Set ``key`` to ``new`` only if it still holds ``old``."""
        with self.redis.pipeline() as pipe:
            try:
                pipe.watch(key)
                current = pipe.get(key)
                if current is None or _text(current) != _text(old):
                    return False
                pipe.multi()
                pipe.set(key, new, ex=self.job_ttl)
                pipe.execute()
                return True
            except redis.WatchError:
                return False


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
