"""A job's events: what happened to it, in order, as a service following it reads them.

Each job has one Redis Stream (``keys.events``), appended by the same script that
writes the state an event reports (``covey/lua/events.lua``): an agent opened (its
ledger row), running, waiting and finished (its tree node), a model call reserved
and settled, a tool call counted and its result kept, and the job's result. A step
run again writes nothing it wrote before, and so no event twice; a crash loses no
event whose state was kept. An event's ``id`` is its stream id
(``1765000000000-0``): the order, the time it was written (milliseconds), and the
place a reader resumes after.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from covey import wire
from covey.results import Usage
from covey.status import AgentStatus, Cause, Wait

PREVIEW_CHARS = 200  # an agent's answer, a tool's arguments and result: the start of each


class EventType(StrEnum):
    AGENT_OPENED = "agent.opened"  # its ledger row: by its parent's spawn, or a root's first step
    AGENT_RUNNING = "agent.running"  # its node: started, or taken up again after a wait (``worker``: where)
    AGENT_WAITING = "agent.waiting"  # on its children, a slot or a window (``wait``)
    AGENT_FINISHED = "agent.finished"  # status, cause, error, the start of its answer, usage
    MODEL_STARTED = "model.started"  # a model call reserved (``reserved`` tokens)
    MODEL_DELTA = "model.delta"  # text of a streamed reply as it arrives (``offset``: where it goes in the reply)
    MODEL_FINISHED = "model.finished"  # a model call settled: usage, or its error (``model``: a fallback that answered)
    TOOL_STARTED = "tool.started"  # a tool call counted on the ledger
    TOOL_FINISHED = "tool.finished"  # its result kept
    APPROVAL_REQUESTED = "approval.requested"  # a tool call waits for a person's decision (until ``until``)
    APPROVAL_DECIDED = "approval.decided"  # ``decision``: approved, denied, or expired (counted as denied)
    JOB_FINISHED = "job.finished"  # the root's end: the job's whole answer


class JobEvent(BaseModel):
    """One event. Which fields an event has depends on its type (the rest are None)."""

    model_config = ConfigDict(extra="ignore")

    id: str = ""  # the stream id, given by Redis when it was written
    type: EventType
    agent_id: str
    parent_id: str | None = None
    role: str | None = None
    depth: int | None = None
    task: str | None = None
    wait: Wait | None = None  # a waiting agent's wait for a slot or a window
    awaiting: list[str] | None = None  # the children a waiting agent waits on
    status: AgentStatus | None = None
    cause: Cause | None = None
    error: str | None = None
    output: str | None = None
    usage: Usage | None = None
    call_id: str | None = None
    cycle: int | None = None
    model: str | None = None
    reserved: int | None = None  # tokens a model call was granted
    finish_reason: str | None = None
    offset: int | None = None  # a delta's place in its reply's text, in characters
    text: str | None = None  # a delta's text
    latency_ms: float | None = None
    cached: bool | None = None  # a model call served from the reply cache (charged nothing)
    tool: str | None = None
    arguments: str | None = None
    result: str | None = None
    until: datetime | None = None  # when an approval not decided counts as denied
    decision: str | None = None
    reason: str | None = None  # a denial's
    worker: str | None = None  # the worker process (``host:pid``) that took the agent up

    @property
    def at(self) -> datetime | None:
        """When Redis wrote it (to the millisecond), from its id."""
        if not self.id:
            return None
        return datetime.fromtimestamp(int(self.id.split("-", 1)[0]) / 1000, tz=UTC)

    @property
    def final(self) -> bool:
        """Whether it is the job's last event."""
        return self.type is EventType.JOB_FINISHED

    def dumps(self) -> str:
        """As stored in the stream, kept small (a finished job's events stay as long
        as its records): without its id (Redis gives it), the fields its type leaves
        empty, usage's zeros and what usage computes."""
        return self.model_dump_json(exclude={"id": True, "usage": {"total_tokens", "cost_usd"}}, exclude_defaults=True)

    @classmethod
    def loads(cls, event_id: str, raw: str) -> JobEvent:
        return cls.model_validate_json(raw).model_copy(update={"id": event_id})


def preview(text: str | None) -> str | None:
    return None if text is None else wire.cut(text, PREVIEW_CHARS)
