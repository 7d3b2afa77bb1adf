"""What an agent must remember across a fan-out: checkpointed in Redis while it waits."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import redis
from pydantic import BaseModel, Field

from covey import keys
from covey.context import RunContext
from covey.results import AgentResult, ChildSummary, Usage
from covey.spec import AgentSpec


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
    deadline: datetime | None = Field(default=None, description="the agent's own timeout")
    task_deadline: datetime | None = Field(
        default=None, description="when the running Celery task must end (COVEY_MAX_AGENT_SECONDS)"
    )


class Checkpoints:
    """A waiting parent's ``AgentState``, saved before its chord and read by ``resume``."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def save(self, state: AgentState) -> None:
        key = keys.checkpoint(state.ctx.job_id, state.ctx.agent_id, state.spawn_round)
        self._redis.set(key, state.model_dump_json(), ex=keys.JOB_TTL_SECONDS)

    def load(self, job_id: str, agent_id: str, spawn_round: int) -> AgentState | None:
        raw = self._redis.get(keys.checkpoint(job_id, agent_id, spawn_round))
        return None if raw is None else AgentState.model_validate_json(raw)
