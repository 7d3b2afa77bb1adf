"""The job's tree as the worker records it and ``covey tree`` shows it.

One Redis hash per job (agent id -> node JSON). A node is written when its parent
opens it (``queued``), when it starts (``running``), when it waits on its children
(``waiting``) and when it ends (its result's status), so a reader sees the live
shape of a running job.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import redis
from pydantic import BaseModel

from covey import keys
from covey.results import AgentResult, Status, Usage

QUEUED = "queued"
RUNNING = "running"
WAITING = "waiting"  # on its children: no task of its own runs until they report
FINAL = frozenset(s.value for s in Status)
TASK_PREVIEW_CHARS = 80  # a node keeps the start of its task: enough to tell siblings apart


def preview(task: str) -> str:
    return task if len(task) <= TASK_PREVIEW_CHARS else task[: TASK_PREVIEW_CHARS - 1] + "…"


class Node(BaseModel):
    agent_id: str
    parent_id: str | None = None
    depth: int = 0
    role: str = "agent"
    status: str = QUEUED
    usage: Usage = Usage()
    output: str | None = None
    error: str | None = None
    data: Any = None
    task: str | None = None  # its start (``preview``)
    task_id: str | None = None  # the Celery task that runs it (the same across its resumes)
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def final(self) -> bool:
        return self.status in FINAL

    def result(self, job_id: str) -> AgentResult:
        """The result of a finished agent as its node keeps it (without children's summaries)."""
        return AgentResult(
            job_id=job_id, agent_id=self.agent_id, parent_id=self.parent_id, role=self.role, depth=self.depth,
            status=Status(self.status), output=self.output, error=self.error, data=self.data, usage=self.usage,
            started_at=self.started_at, finished_at=self.finished_at,
        )

    @classmethod
    def of(cls, result: AgentResult, task: str | None = None, task_id: str | None = None) -> Node:
        return cls(
            task=None if task is None else preview(task),
            task_id=task_id,
            started_at=result.started_at,
            finished_at=result.finished_at,
            agent_id=result.agent_id,
            parent_id=result.parent_id,
            depth=result.depth,
            role=result.role,
            status=result.status.value,
            usage=result.usage,
            output=result.output,
            error=result.error,
            data=result.data,
        )


class JobTree:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def record(self, job_id: str, *nodes: Node) -> None:
        if not nodes:
            return
        key = keys.nodes(job_id)
        pipe = self._redis.pipeline()
        pipe.hset(key, mapping={n.agent_id: n.model_dump_json() for n in nodes})
        pipe.expire(key, keys.JOB_TTL_SECONDS)
        pipe.execute()

    def nodes(self, job_id: str) -> list[Node]:
        raw = self._redis.hgetall(keys.nodes(job_id))
        nodes = [Node.model_validate_json(v) for v in raw.values()]
        return sorted(nodes, key=lambda n: (n.depth, n.agent_id))

    def many(self, job_id: str, agent_ids: list[str]) -> list[Node]:
        """The nodes of ``agent_ids`` that exist, in one round trip."""
        if not agent_ids:
            return []
        raw = self._redis.hmget(keys.nodes(job_id), agent_ids)
        return [Node.model_validate_json(v) for v in raw if v is not None]

    def node(self, job_id: str, agent_id: str) -> Node | None:
        raw = self._redis.hget(keys.nodes(job_id), agent_id)
        return None if raw is None else Node.model_validate_json(raw)
