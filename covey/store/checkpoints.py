"""A waiting agent's state in Redis: saved before its chord, read by ``resume``.

One key per agent, holding the fan-out round beside the state, so many rounds
reuse it, a redelivered callback can tell its own round from a later one, and
finishing deletes it. The state is opaque JSON here; the worker parses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files

import redis

from covey import keys

_SAVE = (files("covey.store") / "lua" / "checkpoint.lua").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Checkpoint:
    round: int
    state: str


class Checkpoints:
    def __init__(self, client: redis.Redis, job_ttl: int) -> None:
        self._redis, self._job_ttl = client, job_ttl
        self._save = client.register_script(_SAVE)

    def save(self, job_id: str, agent_id: str, spawn_round: int, state: str) -> bool:
        """Store ``state`` for ``spawn_round``; False if a newer round is stored."""
        key = keys.checkpoint(job_id, agent_id)
        return bool(self._save(keys=[key], args=[spawn_round, state, self._job_ttl]))

    def load(self, job_id: str, agent_id: str) -> Checkpoint | None:
        spawn_round, state = self._redis.hmget(keys.checkpoint(job_id, agent_id), "round", "state")
        if spawn_round is None or state is None:
            return None
        return Checkpoint(round=int(spawn_round), state=state)
