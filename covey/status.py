"""How an agent or a job stands: the one vocabulary of statuses.

Both are ``StrEnum``s, so a status compares equal to its JSON value and reads as
that value in the tree, Flower, ``covey status`` and a sweep's ``results.jsonl``.
"""

from __future__ import annotations

from enum import StrEnum


class AgentStatus(StrEnum):
    """Where one agent is. The first three are live; the rest are how it ended,
    and only those are ever an ``AgentResult``'s status."""

    QUEUED = "queued"  # opened by its parent, its task not yet started
    RUNNING = "running"
    WAITING = "waiting"  # on its children: no task of its own runs until they report
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    BUDGET_EXCEEDED = "budget_exceeded"
    TIMED_OUT = "timed_out"

    @property
    def final(self) -> bool:
        return self in FINAL


FINAL = frozenset(
    {AgentStatus.COMPLETED, AgentStatus.FAILED, AgentStatus.CANCELLED, AgentStatus.BUDGET_EXCEEDED, AgentStatus.TIMED_OUT}
)


class JobStatus(StrEnum):
    """Where a job is: its root agent's status, or what is known of a job whose
    root has not started (``refused`` by the worker, ``unknown`` to covey)."""

    UNKNOWN = "unknown"  # never submitted, expired, or lost with its records
    REFUSED = "refused"  # the worker refused its spec: it never ran
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    BUDGET_EXCEEDED = "budget_exceeded"
    TIMED_OUT = "timed_out"

    @classmethod
    def of_root(cls, status: AgentStatus) -> JobStatus:
        return cls(status.value)

    @property
    def final(self) -> bool:
        """Whether the job will not change again: its root ended, or it was refused."""
        return self is JobStatus.REFUSED or self.value in {s.value for s in FINAL}
