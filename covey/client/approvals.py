"""Deciding on the tool calls agents wait to run (``covey.store.approvals``).

A decision is recorded once (a second one, the same or not, counts for nothing
and says what stands) and sends the waiting agent its next step; one for a job
that has ended says so. A cancel denies every call its job waits on, so its
agents wake and end ``cancelled``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from covey.client.errors import BROKER, REDIS
from covey.errors import CoveyError
from covey.store.approvals import Approval, Decided, Decision, UnknownApproval
from covey.store.outbox import Message

if TYPE_CHECKING:
    from covey.client import Client, JobHandle

CANCELLED = "the job was cancelled"


class JobEnded(CoveyError):
    """A decision for a job that has ended: nothing waits on it."""


def decide(handle: JobHandle, call_id: str, decision: Decision, reason: str | None = None) -> Decided:
    """Record ``decision`` on the job's call ``call_id`` and send its agent on."""
    client = handle._client
    status = handle.status()
    if status.final:
        raise JobEnded(f"job {handle.id} is finished ({status.value}): no call of it waits for a decision")
    with client._reaching(REDIS):
        decided = client.approvals.decide(handle.id, call_id, decision, reason, datetime.now(UTC))
    if decided.message is not None:
        with client._reaching(BROKER):
            Message.loads(decided.message).send(client.app)
    return decided


def deny_all(handle: JobHandle, reason: str) -> None:
    """Deny every call the job waits on (its cancel)."""
    for approval in handle.pending():
        try:
            decide(handle, approval.call_id, "denied", reason)
        except UnknownApproval:  # its records went meanwhile
            continue


def waiting(client: Client, job_id: str | None = None) -> list[Approval]:
    """The calls waiting for a decision, of one job or of every job, oldest first."""
    with client._reaching(REDIS):
        if job_id is not None:
            return client.approvals.pending(job_id)
        jobs = dict.fromkeys(job for job, _ in client.approvals.due())
        found = [a for job in jobs for a in client.approvals.pending(job)]
    return sorted(found, key=lambda a: a.requested_at)
