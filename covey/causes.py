"""``Cause``: why an agent did not complete, as fields a caller can branch on.

Every result that is not ``completed`` carries one beside its ``error`` sentence,
which is for people: a sweep retries, narrows its window or stops on the cause's
kind and fields, never on the text.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict

from covey.status import AgentStatus


class CauseKind(str, Enum):
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

    def __str__(self) -> str:
        return self.value

    @property
    def status(self) -> AgentStatus:
        """The status an agent ending for this cause reports."""
        return _STATUS.get(self, AgentStatus.FAILED)


_STATUS = {
    CauseKind.BUDGET: AgentStatus.BUDGET_EXCEEDED,
    CauseKind.CANCELLED: AgentStatus.CANCELLED,
    CauseKind.DEADLINE: AgentStatus.TIMED_OUT,
}


class Resource(str, Enum):
    """What a ledger row ran short of."""

    TOKENS = "tokens"
    CYCLES = "cycles"  # model calls
    AGENTS = "agents"  # spawns in the subtree
    DEPTH = "depth"
    TOKENS_PER_MINUTE = "tokens_per_minute"
    REQUESTS_PER_MINUTE = "requests_per_minute"

    def __str__(self) -> str:
        return self.value


class Cause(BaseModel):
    """The kind, and the fields of it a caller needs; the rest are None."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: CauseKind
    scope: str | None = None  # the global scope that was short (``global``, ``tenant:<name>``, ``sweep:<id>``)
    agent_id: str | None = None  # the agent whose row was short
    resource: Resource | None = None
    status: int | None = None  # the model endpoint's HTTP status
    retry_after: float | None = None  # seconds to wait before asking again
