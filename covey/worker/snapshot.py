"""What a step reads before it decides on its delivery, behind one interface.

``StepRecords.snapshot`` reads, for the agent a delivery names, everything
``covey.worker.step.admit`` decides on: its tree node, the message its outbox
expects next, its checkpoint, its ledger row (an agent's first step), the digest
of its job's spec (a job's first) and which of the scopes a job names exist.
``RedisStepRecords`` reads them in one round trip (a second only for a finished
agent, or for a message nothing expects; a running job's digest is its run_job's
open's to check); ``MemoryStepRecords`` holds them in
dicts, so the step's decisions are unit-tested over both with the same cases.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import redis

from covey import keys, wire
from covey.budgets.ledger import AgentRow
from covey.budgets.redis_ledger import agent_row
from covey.budgets.scopes import GLOBAL
from covey.context import ROOT_AGENT_ID
from covey.store.checkpoints import Checkpoint
from covey.store.tree import Node, unpack

Stored = Callable[[str], bool]  # task id -> whether its task's result is stored as a success


@dataclass(frozen=True)
class Delivery:
    """The message a step takes up, as Celery delivered it."""

    name: str  # the task's
    task_id: str
    kwargs: dict[str, Any]
    job_id: str
    agent_id: str
    queue: str  # the job's queue, where every message the step sends goes
    scopes: tuple[str, ...] = ()  # a run_job's: the ledger scopes its job names
    digest: str | None = None  # a run_job's: its spec's (``wire.digest``)


@dataclass(frozen=True)
class Snapshot:
    """What a step reads of its agent before it decides."""

    node: Node | None
    expected: str | None  # the message the agent's next step is, as stored
    checkpoint: Checkpoint | None  # read for a run_job, a resume and a proceed
    row: AgentRow | None = None  # read for an agent's first step only (run_job opens the root's first)
    unknown_scope: str | None = None  # of the scopes a run_job names, one never created
    digest: str | None = None  # for a run_job of a finished job: the spec's its root row was opened with
    result_stored: bool = False  # read only for a final node: the task's result is stored already
    records_gone: bool = False  # read only when nothing is expected of a step no outbox records


def first_step(name: str, checkpoint: Checkpoint | None) -> bool:
    """A root's first step, which a covey client's outbox records and a bare Celery
    client's does not: a run_job before its root saved a checkpoint."""
    return name == wire.RUN_JOB and checkpoint is None


class StepRecords(Protocol):
    def snapshot(self, delivery: Delivery, stored: Stored) -> Snapshot:
        """What ``delivery``'s agent's records hold now; ``stored`` is asked only of a finished agent."""


class RedisStepRecords:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def snapshot(self, delivery: Delivery, stored: Stored) -> Snapshot:
        job_id, agent_id, name = delivery.job_id, delivery.agent_id, delivery.name
        named = _named(delivery)
        with self._redis.pipeline(transaction=False) as pipe:
            pipe.hget(keys.nodes(job_id), agent_id)
            pipe.hget(keys.expected(job_id), agent_id)
            if name != wire.AGENT:
                pipe.hmget(keys.checkpoint(job_id, agent_id), "round", "state")
            if name == wire.AGENT:
                pipe.hgetall(keys.agent(job_id, agent_id))
            if named:
                pipe.smismember(keys.scopes_index(), named)
            node_raw, expected, *more = pipe.execute()
        saved = more.pop(0) if name != wire.AGENT else None
        row = more.pop(0) if name == wire.AGENT else None
        created = more.pop(0) if named else []
        node = None if node_raw is None else unpack(agent_id, node_raw)
        checkpoint = None if saved is None else Checkpoint.of(*saved)
        gone = expected is None and not first_step(name, checkpoint) and not self._root_opened(job_id)
        # A running job's root row is read by the run_job's own open; a finished one's only here.
        final = node is not None and node.final
        digest = self._redis.hget(keys.agent(job_id, agent_id), "digest") if final and name == wire.RUN_JOB else None
        return Snapshot(
            node=node,
            expected=None if expected is None else str(expected),
            checkpoint=checkpoint,
            row=agent_row(agent_id, row) if row else None,
            unknown_scope=next((s for s, known in zip(named, created) if not known), None),
            digest=digest,
            result_stored=final and stored(delivery.task_id),
            records_gone=gone,
        )

    def _root_opened(self, job_id: str) -> bool:
        return bool(self._redis.exists(keys.agent(job_id, ROOT_AGENT_ID)))


@dataclass
class MemoryStepRecords:
    """The same records in dicts, keyed by (job id, agent id); scopes by name."""

    nodes: dict[tuple[str, str], Node] = field(default_factory=dict)
    expected: dict[tuple[str, str], str] = field(default_factory=dict)
    checkpoints: dict[tuple[str, str], Checkpoint] = field(default_factory=dict)
    rows: dict[tuple[str, str], AgentRow] = field(default_factory=dict)
    scopes: set[str] = field(default_factory=set)

    def snapshot(self, delivery: Delivery, stored: Stored) -> Snapshot:
        at = (delivery.job_id, delivery.agent_id)
        node, expected = self.nodes.get(at), self.expected.get(at)
        checkpoint = self.checkpoints.get(at) if delivery.name != wire.AGENT else None
        row = self.rows.get(at)
        opened = (delivery.job_id, ROOT_AGENT_ID) in self.rows
        final = node is not None and node.final
        return Snapshot(
            node=node,
            expected=expected,
            checkpoint=checkpoint,
            row=row if delivery.name == wire.AGENT else None,
            unknown_scope=next((s for s in _named(delivery) if s not in self.scopes), None),
            digest=row.digest if delivery.name == wire.RUN_JOB and row is not None and final else None,
            result_stored=final and stored(delivery.task_id),
            records_gone=expected is None and not first_step(delivery.name, checkpoint) and not opened,
        )


def _named(delivery: Delivery) -> list[str]:
    """The scopes a job names that must have been created: global always is."""
    return [s for s in delivery.scopes if s != GLOBAL]
