"""``AgentResult``: what every agent returns, whatever went wrong.

A child never fails its parent's join; every failure is a result with a
status and a ``Cause``, so the join always happens and the parent decides what to do.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, computed_field, field_validator

from covey.status import AgentStatus, Cause

T = TypeVar("T")


class Usage(BaseModel):
    """Spend of an agent's whole subtree (its own calls plus its children's)."""

    model_config = ConfigDict(extra="ignore")

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cycles: int = 0
    agents: int = Field(default=0, description="sub-agents started below this agent")
    tool_calls: int = Field(default=0, description="tool calls run in the worker (control tools are not counted)")
    cached_tokens: int = Field(default=0, description="of prompt_tokens, those the provider served from its cache")
    cost_micros: int = Field(default=0, description="what it cost in micro-dollars, where its models have prices")
    model_retries: int = Field(
        default=0, description="the SDK's retries (429, 5xx, timeouts) before the model calls that were answered"
    )

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form
    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cost_usd(self) -> float:
        return self.cost_micros / 1_000_000

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cycles=self.cycles + other.cycles,
            agents=self.agents + other.agents,
            tool_calls=self.tool_calls + other.tool_calls,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cost_micros=self.cost_micros + other.cost_micros,
            model_retries=self.model_retries + other.model_retries,
        )


class ChildSummary(BaseModel):
    """All a parent learns of a child: never its message history."""

    agent_id: str
    role: str
    status: AgentStatus
    output: str | None = None
    error: str | None = None
    cause: Cause | None = None
    data: Any = Field(default=None, description="the structured answer (a JSON value), when the agent gave one")


class AgentResult(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # First, so that every repr of a result (Flower's task list, `celery events`,
    # a worker's log) opens with how the agent ended.
    status: AgentStatus
    job_id: str
    agent_id: str
    parent_id: str | None = None
    role: str = "agent"
    depth: int = 0
    output: str | None = None
    error: str | None = None  # for people; branch on ``cause``
    cause: Cause | None = Field(
        default=None,
        description="why it did not complete: set on every other status; on a completed agent, the budget "
        "that ran out before its wrap-up answer (data.wrapped_up)",
    )
    data: Any = Field(default=None, description="the structured answer (a JSON value), when the agent gave one")
    usage: Usage = Field(default_factory=Usage)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    children: list[ChildSummary] = Field(default_factory=list)

    @field_validator("status")
    @classmethod
    def _ended(cls, value: AgentStatus) -> AgentStatus:
        if not value.final:
            raise ValueError(f"a result's status is how the agent ended, not {value.value!r}")
        return value

    @property
    def ok(self) -> bool:
        return self.status is AgentStatus.COMPLETED

    def output_as(self, type_: type[T]) -> T:
        """The structured answer as ``type_`` (a pydantic model, a dataclass, any type
        pydantic validates): ``data`` where the agent gave one, else ``output`` read
        as JSON. An agent of another framework with a typed output sends it as JSON;
        this is where it becomes its type again. ``ValidationError`` when it does not fit."""
        adapter = TypeAdapter(type_)
        if self.data is not None:
            return adapter.validate_python(self.data)
        if self.output is None:
            raise ValueError(f"agent {self.agent_id} ended {self.status.value} with no output to read")
        return adapter.validate_json(self.output)

    @property
    def wrapped_up(self) -> bool:
        """Completed with a wrap-up answer: its budget ran out first (``cause``)."""
        return self.ok and self.cause is not None

    def summary(self) -> ChildSummary:
        return ChildSummary(
            agent_id=self.agent_id,
            role=self.role,
            status=self.status,
            output=self.output,
            error=self.error,
            cause=self.cause,
            data=self.data,
        )
