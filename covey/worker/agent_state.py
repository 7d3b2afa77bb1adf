"""What an agent must remember across a fan-out: checkpointed in Redis while it waits."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from covey.context import RunContext
from covey.results import AgentResult, ChildSummary, Usage
from covey.spec import AgentSpec
from covey.status import AgentStatus
from covey.store.tree import Node, preview


class PendingChild(BaseModel):
    """One child of the current fan-out: running (``agent_id``) or refused at open."""

    agent_id: str
    refused: AgentResult | None = None


class AgentState(BaseModel):
    ctx: RunContext
    spec: AgentSpec
    strategy: dict[str, Any] = Field(default_factory=dict)
    cycle: int = Field(default=0, description="model calls made; names the next reservation")
    usage: Usage = Field(default_factory=Usage, description="own calls plus finished children")
    children: list[ChildSummary] = Field(default_factory=list)
    spawn_round: int = 0
    pending: list[PendingChild] = Field(default_factory=list)
    started_at: datetime
    task_id: str | None = Field(default=None, description="the Celery task running this agent")
    deadline: datetime | None = Field(default=None, description="the agent's own timeout")
    task_deadline: datetime | None = Field(
        default=None, description="when the running task checkpoints and goes on as a new one (COVEY_SLICE_SECONDS)"
    )
    step: int = Field(default=0, description="checkpoints saved: orders them, so a stale task cannot overwrite a newer")
    next_action: dict[str, Any] | None = Field(
        default=None, description="the Action a paused agent takes when its next task starts"
    )
    recorded_at: datetime | None = Field(default=None, description="when its running node was last written")

    def node(self, status: AgentStatus) -> Node:
        """The agent's tree node as it stands: its usage so far, for readers and the crash path."""
        ctx = self.ctx
        return Node(
            agent_id=ctx.agent_id, parent_id=ctx.parent_id, depth=ctx.depth, role=self.spec.role,
            status=status, usage=self.usage, task=preview(self.spec.task), task_id=self.task_id,
            started_at=self.started_at,
        )
