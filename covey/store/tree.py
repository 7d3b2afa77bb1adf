"""The job's tree as the worker records it and ``covey tree`` shows it.

One Redis hash per job (agent id -> node JSON). A node is written when its parent
opens it (``queued``), when it starts (``running``), when it waits on its children
(``waiting``) and when it ends (its result's status), so a reader sees the live
shape of a running job.

A finished job keeps a node per agent for ``COVEY_JOB_TTL``, so a node is stored
packed: one-letter field names (a cause's too), usage as a list, no empty fields,
and no task id once it is final (only a live agent's task is looked for among the
workers').
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from importlib.resources import files
from typing import Any

import redis
from pydantic import BaseModel

from covey import keys, redis_scripts, wire
from covey.budgets.ledger import Settling
from covey.errors import StateLost
from covey.events import EventType, JobEvent
from covey.events import preview as shown
from covey.redis_scripts import Reply, ScriptCall
from covey.results import AgentResult, ChildSummary, Usage
from covey.status import AgentStatus, Cause, Wait
from covey.store import join, transcripts
from covey.store.transcripts import Entries

NODES = (files("covey.store") / "lua" / "nodes.lua").read_text(encoding="utf-8")
_RECORD = transcripts.script("record.lua", NODES)
_FINISH = transcripts.script("finish.lua", join.LUA, NODES)
FINALS = "," + ",".join(s.value for s in AgentStatus if s.final) + ","  # what the scripts never write over

TASK_PREVIEW_CHARS = 80  # a node keeps the start of its task: enough to tell siblings apart


def preview(task: str) -> str:
    return wire.cut(task, TASK_PREVIEW_CHARS)


class Node(BaseModel):
    agent_id: str
    parent_id: str | None = None
    depth: int = 0
    role: str = "agent"
    status: AgentStatus = AgentStatus.QUEUED
    usage: Usage = Usage()
    output: str | None = None
    error: str | None = None
    cause: Cause | None = None
    data: Any = None
    task: str | None = None  # its start (``preview``)
    task_id: str | None = None  # the Celery task that runs it (the same across its resumes)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    wait: Wait | None = None  # what a waiting agent with no children out waits for (a scope's cap or window)
    # A running agent's worker process (``host:pid``): named in its agent.running event, not
    # stored with the node (a reader of the release before would refuse a key it does not know).
    worker: str | None = None

    @property
    def final(self) -> bool:
        return self.status.final

    def result(self, job_id: str, children: Sequence[ChildSummary] = ()) -> AgentResult:
        """The result of a finished agent as its node keeps it, with ``children``'s
        summaries (a node keeps none). The worker builds every result here, from the
        node it records, so a result and its agent's node never disagree."""
        return AgentResult(
            job_id=job_id,
            agent_id=self.agent_id,
            parent_id=self.parent_id,
            role=self.role,
            depth=self.depth,
            status=self.status,
            output=self.output,
            error=self.error,
            cause=self.cause,
            data=self.data,
            usage=self.usage,
            started_at=self.started_at,
            finished_at=self.finished_at,
            children=list(children),
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
            status=result.status,
            usage=result.usage,
            output=result.output,
            error=result.error,
            cause=result.cause,
            data=result.data,
        )


_PACKED = {
    "parent_id": "p",
    "depth": "d",
    "role": "r",
    "status": "s",
    "usage": "u",
    "output": "o",
    "error": "e",
    "cause": "c",
    "data": "x",
    "task": "t",
    "task_id": "i",
    "started_at": "a",
    "finished_at": "f",
    "wait": "w",
}
_UNPACKED = {short: name for name, short in _PACKED.items()}
_CAUSE = {
    "kind": "k",
    "scope": "s",
    "agent_id": "a",
    "resource": "r",
    "status": "h",
    "retry_after": "w",
    "retries": "n",
    "guardrail": "g",
    "call": "c",
}
_CAUSE_UNPACKED = {short: name for name, short in _CAUSE.items()}
# Usage as a list in this order; the fields after the first four only where they are not all 0
# (older records lack them).
_USAGE = (
    "prompt_tokens",
    "completion_tokens",
    "cycles",
    "agents",
    "tool_calls",
    "cached_tokens",
    "cost_micros",
    "model_retries",
)
_USAGE_ALWAYS = 4


def by_parent(nodes: Sequence[Node]) -> dict[str | None, list[Node]]:
    """Each agent's children (the root under None), in the order given."""
    children: dict[str | None, list[Node]] = {}
    for node in nodes:
        children.setdefault(node.parent_id, []).append(node)
    return children


def pack(node: Node) -> str:
    fields = node.model_dump(mode="json", exclude_none=True, exclude={"agent_id", "usage", "worker"})
    if node.final:
        fields.pop("task_id", None)
    if "cause" in fields:
        fields["cause"] = {_CAUSE[name]: value for name, value in fields["cause"].items()}
    packed = {_PACKED[name]: value for name, value in fields.items()}
    usage = [getattr(node.usage, name) for name in _USAGE]
    packed["u"] = usage if any(usage[_USAGE_ALWAYS:]) else usage[:_USAGE_ALWAYS]
    return json.dumps(packed, separators=(",", ":"), ensure_ascii=False)


def unpack(agent_id: str, raw: str) -> Node:
    fields = {_UNPACKED[short]: value for short, value in json.loads(raw).items()}
    fields["usage"] = Usage(**dict(zip(_USAGE, fields.pop("usage"))))
    if "cause" in fields:
        fields["cause"] = {_CAUSE_UNPACKED[short]: value for short, value in fields["cause"].items()}
    return Node(agent_id=agent_id, **fields)


def moved(node: Node, awaiting: Sequence[str] = ()) -> str:
    """The event a write of ``node`` makes when it changes the node's status (none for
    ``queued``: the agent's opening has its own); a waiting agent's names the
    children it waits on (``awaiting``)."""
    if node.status is AgentStatus.QUEUED:
        return ""
    if node.status is AgentStatus.RUNNING:
        event = JobEvent(type=EventType.AGENT_RUNNING, agent_id=node.agent_id, worker=node.worker)
    elif node.status is AgentStatus.WAITING:
        event = JobEvent(
            type=EventType.AGENT_WAITING, agent_id=node.agent_id, wait=node.wait, awaiting=list(awaiting) or None
        )
    else:
        event = JobEvent(
            type=EventType.AGENT_FINISHED,
            agent_id=node.agent_id,
            status=node.status,
            cause=node.cause,
            error=node.error,
            output=shown(node.output),
            usage=node.usage,
        )
    return event.dumps()


def ended(node: Node) -> list[str]:
    """The events of a final ``node``: the agent's end, and for a root the job's."""
    events = [moved(node)]
    if node.parent_id is None:
        job = JobEvent(
            type=EventType.JOB_FINISHED,
            agent_id=node.agent_id,
            status=node.status,
            cause=node.cause,
            error=node.error,
            output=node.output,
            usage=node.usage,
        )
        events.append(job.dumps())
    return events


class JobTree:
    """Nodes are written by scripts that never write over a final node: a stale or
    duplicate step cannot take back an agent's end, whatever it tries to record."""

    def __init__(self, client: redis.Redis, job_ttl: int) -> None:
        self._redis, self._job_ttl = client, job_ttl
        self._record = client.register_script(_RECORD)
        self._finish = client.register_script(_FINISH)

    def record(self, job_id: str, *nodes: Node, transcript: Entries | None = None) -> int:
        """Write ``nodes``, but none over a final one, and append ``transcript``;
        returns how many nodes were written."""
        if not nodes:
            return 0
        call = self.recording(job_id, *nodes, transcript=transcript)
        return int(call())

    def recording(self, job_id: str, *nodes: Node, transcript: Entries | None = None) -> ScriptCall:
        """``record``'s script call, for a caller that runs it with others in one round trip."""
        args: list[Any] = [self._job_ttl, FINALS]
        for n in nodes:
            args += [n.agent_id, pack(n)]
        more_keys, more_args = transcripts.tail(transcript)
        event_keys, event_args = redis_scripts.events_tail(
            keys.events(job_id), self._job_ttl, [moved(n) for n in nodes]
        )
        return ScriptCall(self._record, [keys.nodes(job_id), *more_keys, *event_keys], [*args, *more_args, *event_args])

    def finish(
        self,
        job_id: str,
        node: Node,
        retire: Sequence[str] = (),
        transcript: Entries | None = None,
        also: Callable[[str], Sequence[ScriptCall]] | None = None,
        settling: Settling | None = None,
    ) -> tuple[bool, str | None]:
        """Write an agent's final ``node`` once, and delete ``retire`` (keys its end
        makes obsolete: its checkpoint, its stored replies), and its expected message;
        append its last ``transcript`` entries; count it off its parent's join
        (``covey.store.join``).

        Returns whether it was written (False: the agent had already finished), and
        the parent's resume message when this child makes it due: the caller sends
        it. ``also``, given the node as the record holds it, makes script calls that
        run after it in the same round trip. ``settling``, the
        settlement of the agent's last model call, runs before it in that round
        trip, its reply read as ``Ledger.settle``'s; the record is then written only
        while the agent's ledger row is there, so a job wiped during the call keeps
        no final record and the settlement's ``StateLost`` says why."""
        parent = node.parent_id or ""
        joined = join.keys(job_id, parent or node.agent_id)  # a root's own, which its script leaves alone
        guard = [keys.agent(job_id, node.agent_id)] if settling is not None else []
        more_keys, more_args = transcripts.tail(transcript)
        event_keys, event_args = redis_scripts.events_tail(keys.events(job_id), self._job_ttl, ended(node))
        record = pack(node)
        call = ScriptCall(
            self._finish,
            [keys.nodes(job_id), keys.expected(job_id), *joined, *guard, *retire, *more_keys, *event_keys],
            [node.agent_id, record, self._job_ttl, parent, FINALS, len(guard), *more_args, *event_args],
        )
        first = [settling.call] if settling is not None else []
        calls = [*first, call, *(also(record) if also is not None else [])]
        if len(calls) == 1:
            written, *resume = call()
        else:
            replies = redis_scripts.run(self._redis, calls)
            if settling is not None:
                settling.charged(replies[0])
            written, *resume = replies[len(first)]
        if written == Reply.MISSING:
            raise StateLost(f"the ledger row of agent {node.agent_id} of job {job_id} is gone from Redis")
        return written == Reply.OK, (resume[0] if resume else None)

    def nodes(self, job_id: str) -> list[Node]:
        raw = self._redis.hgetall(keys.nodes(job_id))
        nodes = [unpack(agent_id, v) for agent_id, v in raw.items()]
        return sorted(nodes, key=lambda n: (n.depth, n.agent_id))

    def many(self, job_id: str, agent_ids: list[str]) -> list[Node]:
        """The nodes of ``agent_ids`` that exist, in one round trip."""
        if not agent_ids:
            return []
        raw = self._redis.hmget(keys.nodes(job_id), agent_ids)
        return [unpack(agent_id, v) for agent_id, v in zip(agent_ids, raw) if v is not None]

    def node(self, job_id: str, agent_id: str) -> Node | None:
        raw = self._redis.hget(keys.nodes(job_id), agent_id)
        return None if raw is None else unpack(agent_id, raw)
