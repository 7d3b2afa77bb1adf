"""A waiting parent's ``AgentState`` in Redis, saved before its chord, read by ``resume``."""

from __future__ import annotations

import redis

from covey import keys
from covey.worker.agent_state import AgentState


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
