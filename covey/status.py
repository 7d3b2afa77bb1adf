"""How an agent or a job stands, and why it did not complete: the one vocabulary.

``AgentStatus`` and ``JobStatus`` say where an agent or a job is. Every result that
is not ``completed`` also carries a ``Cause`` beside its ``error`` sentence, which
is for people: a caller (a sweep retrying, narrowing its window or stopping)
branches on the cause's kind and fields, never on the text.

The enums are ``StrEnum``s, so each compares equal to its JSON value and reads as
that value in the tree, Flower, ``covey status`` and a sweep's ``results.jsonl``.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict


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
    {
        AgentStatus.COMPLETED,
        AgentStatus.FAILED,
        AgentStatus.CANCELLED,
        AgentStatus.BUDGET_EXCEEDED,
        AgentStatus.TIMED_OUT,
    }
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


class CauseKind(StrEnum):
    BUDGET = "budget"  # a ledger row had too little left: ``scope`` or ``agent_id``, and ``resource``
    # The provider answered HTTP 429 (``status``, ``retry_after`` when it said so), or a
    # scope's per-minute window is full (``scope``, ``resource``, ``retry_after``).
    RATE_LIMITED = "rate_limited"
    MODEL_ERROR = "model_error"  # the call failed: an HTTP ``status``, or none (timeout, unreachable)
    MALFORMED_REPLY = "malformed_reply"  # a reply that cannot be used: unparseable, off its schema, a tool not offered
    REPLY_CUT = "reply_cut"  # cut at its token cap (max_call_tokens)
    CONTENT_FILTER = "content_filter"  # withheld by the provider's content filter
    CANCELLED = "cancelled"
    DEADLINE = "deadline"  # the job's deadline or the agent's timeout passed
    INVALID_SPEC = "invalid_spec"  # refused before it ran: a spec (or a child request) that cannot run
    GAVE_UP = "gave_up"  # the strategy ended without an answer (its steps or candidates failed)
    INTERNAL = "internal"  # a bug or a crash in the worker
    STATE_LOST = "state_lost"  # records the agent needed were gone from Redis
    GUARDRAIL = "guardrail"  # a guardrail of the job tripped (``guardrail`` names it)
    # An agent replayed after a crash or a pause asked for another call than the one its
    # record holds (its code, or what it read, changed): ``call`` names the one recorded.
    NONDETERMINISTIC = "nondeterministic"

    @property
    def status(self) -> AgentStatus:
        """The status an agent ending for this cause reports."""
        return _STATUS.get(self, AgentStatus.FAILED)


_STATUS = {
    CauseKind.BUDGET: AgentStatus.BUDGET_EXCEEDED,
    CauseKind.CANCELLED: AgentStatus.CANCELLED,
    CauseKind.DEADLINE: AgentStatus.TIMED_OUT,
}


class Resource(StrEnum):
    """What a ledger row ran short of."""

    TOKENS = "tokens"
    CYCLES = "cycles"  # model calls
    AGENTS = "agents"  # spawns in the subtree
    DEPTH = "depth"
    TOKENS_PER_MINUTE = "tokens_per_minute"
    REQUESTS_PER_MINUTE = "requests_per_minute"
    TOOL_CALLS = "tool_calls"  # tool calls of the job
    COST = "cost"  # micro-dollars


class Cause(BaseModel):
    """The kind, and the fields of it a caller needs; the rest are None."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: CauseKind
    scope: str | None = None  # the global scope that was short (``global``, ``tenant:<name>``, ``sweep:<id>``)
    agent_id: str | None = None  # the agent whose row was short
    resource: Resource | None = None
    status: int | None = None  # the model endpoint's HTTP status
    retry_after: float | None = None  # seconds to wait before asking again
    retries: int | None = None  # the SDK's retries of the model call before it failed for good, when it took any
    guardrail: str | None = None  # the guardrail that stopped the agent
    call: str | None = None  # the recorded call a replay did not ask for again (nondeterministic)


APPROVAL = "a person's approval"  # how a wait for a decision on a tool call begins (covey.worker.approvals)


class Wait(BaseModel):
    """What a ``waiting`` agent that holds no worker slot waits for, and until when
    it next asks: a scope's running cap (``tenant:acme running cap 2/2``) or its
    per-minute window. It waits outside the workers, re-sent with a countdown."""

    model_config = ConfigDict(frozen=True)

    reason: str
    until: datetime

    @property
    def approval(self) -> bool:
        """Whether it waits for a person's decision on a tool call."""
        return self.reason.startswith(APPROVAL)

    def said(self, now: datetime) -> str:
        """``tenant:acme running cap 2/2, ~3 s``: the wait's reason and the seconds to its end (or next look)."""
        return f"{self.reason}, ~{max(0, round((self.until - now).total_seconds()))} s"
