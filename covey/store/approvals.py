"""Tool calls that wait for a person: asked for, decided once, and the agent taken up.

An agent whose tool call needs approval asks for it (``request``: once per call,
with the ``approval.requested`` event) and waits out of every worker slot: the
message that takes it up again is held out of the outbox by its checkpoint's
script (``lua/advance.lua``). A decision (``decide``: approved, denied, or
expired at its deadline, which counts as denied) is recorded once, with its
``approval.decided`` event, and moves that message into the outbox for the
decider to send; a decision that comes before the agent waits is found by its
checkpoint's script, which sends the agent on at once. Undecided approvals of
every job are indexed by deadline (``keys.approvals_due``) for the workers that
expire them and for ``covey approvals``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import redis
from pydantic import BaseModel

from covey import keys, redis_scripts
from covey.errors import CoveyError
from covey.events import EventType, JobEvent
from covey.redis_scripts import Reply, source

Decision = Literal["approved", "denied", "expired"]
MAX_REASON_CHARS = 1000  # of a denial's reason: the model reads it

_REQUEST = source("covey.store", "request.lua", events=True)
_DECIDE = source("covey.store", "decide.lua", events=True)


class Approval(BaseModel):
    """One tool call's approval: what was asked, and the decision once made."""

    job_id: str
    call_id: str
    agent_id: str
    tool: str
    arguments: str
    requested_at: datetime
    until: datetime
    decision: Decision | None = None
    reason: str | None = None
    decided_at: datetime | None = None

    @property
    def approved(self) -> bool:
        return self.decision == "approved"


@dataclass(frozen=True)
class Decided:
    """What a decision did: ``recorded`` (False: an earlier one stands, ``approval``
    says which), and the message that takes the agent up again, for the caller to send."""

    approval: Approval
    recorded: bool
    message: str | None


class UnknownApproval(CoveyError, LookupError):
    """No agent of the job asked for approval of this call."""


class Approvals:
    def __init__(self, client: redis.Redis, job_ttl: int) -> None:
        self._redis, self._job_ttl = client, job_ttl
        self._request = client.register_script(_REQUEST)
        self._decide = client.register_script(_DECIDE)

    def read(self, job_id: str, call_ids: Sequence[str]) -> dict[str, Approval]:
        """The approvals asked for among ``call_ids``, by call id."""
        if not call_ids:
            return {}
        raw = self._redis.hmget(keys.approvals(job_id), list(call_ids))
        return {c: Approval.model_validate_json(r) for c, r in zip(call_ids, raw) if r is not None}

    def request(self, job_id: str, approval: Approval) -> bool:
        """Ask for ``approval``; False if it was asked for before (nothing written)."""
        event = JobEvent(
            type=EventType.APPROVAL_REQUESTED,
            agent_id=approval.agent_id,
            call_id=approval.call_id,
            tool=approval.tool,
            arguments=approval.arguments,
            until=approval.until,
        )
        more_keys, more_args = self._events(job_id, event)
        # Without empty fields: a script takes a field that is there as set (a JSON null is no nil in Lua).
        stored = approval.model_dump_json(exclude_none=True)
        args = [approval.call_id, stored, approval.until.timestamp(), self._job_ttl, job_id]
        return (
            self._request(keys=[keys.approvals(job_id), keys.approvals_due(), *more_keys], args=[*args, *more_args])
            == Reply.OK
        )

    def decide(self, job_id: str, call_id: str, decision: Decision, reason: str | None, now: datetime) -> Decided:
        """Record ``decision`` on the call, unless one was; ``UnknownApproval`` for a call never asked about."""
        asked = self.read(job_id, [call_id]).get(call_id)
        if asked is None:
            raise UnknownApproval(f"job {job_id} has no approval {call_id} (covey approvals --job {job_id} lists them)")
        reason = None if reason is None else reason[:MAX_REASON_CHARS]
        event = JobEvent(
            type=EventType.APPROVAL_DECIDED,
            agent_id=asked.agent_id,
            call_id=call_id,
            tool=asked.tool,
            decision=decision,
            reason=reason,
        )
        more_keys, more_args = self._events(job_id, event)
        job_keys = [
            keys.approvals(job_id),
            keys.held(job_id),
            keys.expected(job_id),
            keys.expecting(),
            keys.approvals_due(),
        ]
        args = [call_id, decision, reason or "", now.isoformat(), self._job_ttl, job_id]
        status, *rest = self._decide(keys=[*job_keys, *more_keys], args=[*args, *more_args])
        if status == Reply.MISSING:  # gone with the job's records since it was read
            raise UnknownApproval(f"job {job_id} has no approval {call_id}")
        if status == Reply.ALREADY:
            return Decided(self.read(job_id, [call_id]).get(call_id, asked), False, None)
        decided = asked.model_copy(update={"decision": decision, "reason": reason, "decided_at": now})
        return Decided(decided, True, _text(rest[0]) or None)

    def pending(self, job_id: str) -> list[Approval]:
        """The job's approvals not yet decided, oldest first."""
        raw = self._redis.hvals(keys.approvals(job_id))
        asked = [Approval.model_validate_json(r) for r in raw]
        return sorted((a for a in asked if a.decision is None), key=lambda a: a.requested_at)

    def due(self, now: float | None = None, limit: int | None = None) -> list[tuple[str, str]]:
        """(job id, call id) of undecided approvals, every one or those due by ``now``,
        soonest first; the first ``limit`` of them when given."""
        top = "+inf" if now is None else now
        first = {} if limit is None else {"start": 0, "num": limit}
        members = self._redis.zrangebyscore(keys.approvals_due(), "-inf", top, **first)
        return [tuple(_text(m).split(" ", 1)) for m in members]  # type: ignore[misc]

    def forget(self, job_id: str, call_id: str) -> None:
        """Drop an index entry whose job's records are gone."""
        self._redis.zrem(keys.approvals_due(), f"{job_id} {call_id}")

    def _events(self, job_id: str, event: JobEvent) -> tuple[list[str], list[str | int]]:
        return redis_scripts.events_tail(keys.events(job_id), self._job_ttl, [event.dumps()])


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
