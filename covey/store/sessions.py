"""Sessions: a conversation that outlives its jobs.

A job naming a session starts its root agent from the session's turns so far (each
a task and its answer) and, when it completes, adds its own. One job runs on a
session at a time: its first step claims it (``claim``), its end gives it back
(``ending``, in the round trip of the root's final record) and keeps the turn
once, however often that end is written. A session past ``COVEY_SESSION_BYTES``
drops its oldest turns and counts them; it lives ``COVEY_SESSION_TTL`` past its
last job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import redis
from pydantic import BaseModel, Field

from covey import keys
from covey.redis_scripts import Reply, ScriptCall, source

_CLAIM = source("covey.store", "claim.lua")
_TURN = source("covey.store", "turn.lua")


class Turn(BaseModel):
    job_id: str
    task: str
    answer: str
    at: datetime


class Session(BaseModel):
    name: str
    turns: list[Turn] = Field(default_factory=list)
    dropped: int = Field(default=0, description="turns dropped, oldest first, past the session's size cap")
    job_id: str | None = Field(default=None, description="the job running on it now")

    def messages(self) -> list[dict[str, str]]:
        """The turns as a conversation: each task a user's message, each answer the assistant's."""
        said = []
        for turn in self.turns:
            said += [{"role": "user", "content": turn.task}, {"role": "assistant", "content": turn.answer}]
        return said


@dataclass(frozen=True)
class Busy:
    """Another job runs on the session."""

    job_id: str


class Sessions:
    def __init__(self, client: redis.Redis, ttl: int, cap_bytes: int) -> None:
        self._redis, self._ttl, self._cap = client, ttl, cap_bytes
        self._claim = client.register_script(_CLAIM)
        self._turn = client.register_script(_TURN)

    def claim(self, name: str, job_id: str, hold_seconds: int) -> Session | Busy:
        """The session for ``job_id`` to run on (new and empty if it has no turns),
        or who holds it. The claim lapses after ``hold_seconds`` if no end gives it back."""
        status, found = self._claim(keys=[keys.session(name), keys.session_job(name)], args=[job_id, hold_seconds])
        if status == Reply.ELSEWHERE:
            return Busy(_text(found))
        return _session(name, _text(found), job_id)

    def ending(self, name: str, job_id: str, turn: Turn | None, record: str) -> ScriptCall:
        """The script call that keeps ``turn`` (None: the job did not complete) and gives
        the session back, if the root's final record is ``record`` (this end's)."""
        args = [job_id, "" if turn is None else turn.model_dump_json(), self._cap, self._ttl, record]
        return ScriptCall(self._turn, [keys.session(name), keys.session_job(name), keys.nodes(job_id)], args)

    def read(self, name: str) -> Session | None:
        raw, job = self._redis.mget(keys.session(name), keys.session_job(name))
        if raw is None and job is None:
            return None
        return _session(name, _text(raw or ""), _text(job) if job else None)

    def delete(self, name: str) -> bool:
        """Forget the session and any claim on it; False if there was none."""
        return bool(self._redis.delete(keys.session(name), keys.session_job(name)))


def _session(name: str, raw: str, job_id: str | None) -> Session:
    kept = json.loads(raw) if raw else {}
    turns = kept.get("turns") or []  # Lua writes an empty list as {}: never, but read it as one
    return Session(
        name=name, turns=turns if isinstance(turns, list) else [], dropped=kept.get("dropped", 0), job_id=job_id
    )


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
