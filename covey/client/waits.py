"""Why a job is not moving: what a wait tells the user instead of waiting in silence.

A job can sit still for reasons no result will ever report: its message went to a
queue no covey worker reads, no worker reads covey's queue at all, its agents'
messages wait in its queue after every worker reading it went, a message its
outbox expects was lost (the workers' reconciler sends it again), the worker
running some of its agents died and the broker has not handed their tasks to
another one yet, or a process holds its message (an agent's next step, a
parent's resume once its children finished) unacknowledged and runs none of it
(the broker gives it back at the visibility timeout, or covey's takeover once
that process's heartbeat lapses). Each is found from the broker, the workers'
records and the job's tree, and said in one line naming what is stuck; so is a
job whose records and messages are gone (a Redis wiped), which nothing will ever
finish. It only reads: sending a lost message again is the workers' reconciler's
job, and a diagnosis sends nothing and waits for nothing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import redis

from covey import keys
from covey.config import connections, priorities
from covey.config.deliveries import UNACKED_INDEX, held_by_silent_workers, holder_of, in_broker, silent_workers
from covey.context import ROOT_AGENT_ID
from covey.status import AgentStatus
from covey.store.outbox import Message, Outbox, queues_of
from covey.store.tree import Node, by_parent

if TYPE_CHECKING:
    from covey.client import Client

DEFAULT_CELERY_QUEUE = "celery"  # where a Celery client sends a task that names no queue
QUEUE_PEEK = 1000  # messages looked at per list of a queue: enough for a queue someone is waiting on
INSPECT_SECONDS = 0.5  # how long workers get to answer an inspect broadcast
STALLED_SHOWN = 5  # agents named in a message; the rest are counted
LOST = "in no queue and no unacknowledged set: a worker's reconciler sends it again"  # where a lost message is


def _redis_broker(client: Client) -> redis.Redis | None:
    if not client.settings.redis_broker:
        return None
    return connections.client(client.settings.broker, client.settings.redis_master, decode_responses=True)


def queue_of(client: Client, job_id: str) -> str | None:
    """The broker queue whose first messages hold the job's, on a Redis broker (else None)."""
    broker = _redis_broker(client)
    if broker is None:
        return None
    try:
        for queue in dict.fromkeys([client.settings.queue, DEFAULT_CELERY_QUEUE]):
            for listed in priorities.lists(queue):
                if broker.type(listed) != "list":
                    continue
                if any(_message_id(raw) == job_id for raw in broker.lrange(listed, -QUEUE_PEEK, -1)):
                    return queue
    finally:
        broker.close()
    return None


def _message_id(raw: str) -> str | None:
    try:
        return json.loads(raw).get("headers", {}).get("id")
    except (ValueError, AttributeError):
        return None


def unacked(client: Client, task_id: str) -> str | None:
    """Who holds the task's unacknowledged delivery and what gives it back, on a Redis
    broker (the reconciler's look at kombu's records); None when it has none."""
    broker = _redis_broker(client)
    if broker is None:
        return None
    try:
        tag = next((c.tag for c in in_broker(broker, []).get(task_id, ()) if c.tag is not None), None)
        if tag is None:
            return None
        return _held(broker, tag, broker.zscore(UNACKED_INDEX, tag), _visibility(client))
    finally:
        broker.close()


def _held(broker: redis.Redis, tag: str, delivered: float | None, visibility: str) -> str:
    """What holds delivery ``tag`` unacknowledged and what gives it back (at the
    ``visibility`` timeout, as ``_visibility`` says it)."""
    holder = holder_of(broker, tag)
    ago = "" if delivered is None else f" {max(0.0, time.time() - delivered):.0f}s ago"
    timeout = (
        f"the broker delivers it again once its visibility timeout ({visibility}) has passed since its delivery{ago}"
    )
    if holder is None:
        return f"unacknowledged and held by no worker covey knows: {timeout}"
    name, alive = holder
    if not alive:
        return f"held unacknowledged by worker {name}, whose heartbeat lapsed: a live worker puts it back on its queue"
    return (
        f"held unacknowledged by worker {name} (alive), which does not run it: {timeout}, "
        "or a live worker puts it back once that worker's heartbeat lapses"
    )


def _visibility(client: Client) -> str:
    """The visibility timeout that gives a delivery back: the workers' (each gives back
    what it finds unacknowledged past its own), else this client's setting, said so."""
    published = [e.redelivery_seconds for e in client.catalog.entries() if e.redelivery_seconds is not None]
    if published:
        return f"{min(published):g}s, the shortest COVEY_VISIBILITY_TIMEOUT of the live workers"
    return f"COVEY_VISIBILITY_TIMEOUT of the workers; {client.settings.redelivery_seconds:g}s in this client's settings"


def _whereabouts(client: Client, job_id: str, nodes: list[Node]) -> dict[str | None, list[Node]]:
    """The agents grouped by where the message their next step is sits in the broker
    (the reconciler's look): the outbox's, else (a root's first step sent by a bare
    Celery client) the delivery the agent last ran. None for those whose place is not known."""
    broker = _redis_broker(client)
    if broker is None:
        return {None: nodes}
    try:
        expected = Outbox(client.redis).messages(job_id)
        seen = in_broker(broker, queues_of(expected.values(), [client.settings.queue]))
        groups: dict[str | None, list[Node]] = {}
        visibility: str | None = None  # read from the catalog once, for the first agent held
        for node in nodes:
            message = expected.get(node.agent_id)
            if message is None:
                copies = seen.get(node.task_id or "", [])
            else:
                copies = [c for c in seen.get(message.task_id, ()) if message.seen_as(c.headers)]
            if any(c.tag is None for c in copies):
                where: str | None = "queued, waiting for a worker slot"
            elif copies:
                visibility = visibility or _visibility(client)
                where = _held(broker, str(copies[0].tag), None, visibility)
            elif message is not None:
                where = LOST
            else:
                where = None
            groups.setdefault(where, []).append(node)
        return groups
    finally:
        broker.close()


@dataclass(frozen=True)
class Live:
    """What live workers run or hold, and whether any answered a broadcast."""

    task_ids: set[str]
    answered: bool


def live_tasks(client: Client) -> Live | None:
    """The tasks live workers run or hold; None when no worker answers and, on a Redis
    broker, none still beats. A worker too busy to answer the broadcast's short wait
    that still beats runs the tasks it holds (its records in the broker's Redis):
    it is not taken for gone."""
    inspect = client.app.control.inspect(timeout=INSPECT_SECONDS)
    active, reserved = inspect.active() or {}, inspect.reserved() or {}
    answered = set(active) | set(reserved)
    ids = {t["id"] for replies in (active, reserved) for tasks in replies.values() for t in tasks}
    broker = _redis_broker(client)
    if broker is not None:
        try:
            ids |= held_by_silent_workers(broker, answered)
        finally:
            broker.close()
    return Live(ids, bool(answered)) if answered or ids else None


def why_stuck(client: Client, job_id: str) -> str | None:
    """One line saying why the job is not moving, or None when nothing is wrong that
    the broker, the workers or the tree can tell."""
    nodes = client.tree.nodes(job_id)
    if not nodes:
        queue = queue_of(client, job_id)
        if queue is not None and queue != client.settings.queue:
            return (
                f"job {job_id} waits in queue {queue!r}, which no covey worker reads; "
                f"send with queue={client.settings.queue!r}"
            )
        if not client.queue_has_worker():
            return (
                f"no worker reads queue {client.settings.queue!r}; job {job_id} waits until one starts (covey worker)"
            )
        return None if queue is not None else _unstarted(client, job_id)
    if any(n.agent_id == ROOT_AGENT_ID and n.final for n in nodes):
        return None  # finished: nothing is stuck
    asking = [n for n in nodes if n.status is AgentStatus.WAITING and n.wait is not None and n.wait.approval]
    if asking:
        return (
            f"agents of job {job_id} wait for a person's approval of a tool call: {_names(asking)}; "
            f"decide with covey approve / covey deny (covey approvals --job {job_id} lists the calls)"
        )
    live = live_tasks(client)
    due = _resume_due(nodes)
    moving = [n for n in nodes if n.status is AgentStatus.RUNNING or n.agent_id in due]
    queued = [n for n in nodes if n.status is AgentStatus.QUEUED]
    stuck = [n for n in moving if live is None or n.task_id not in live.task_ids] + (queued if live is None else [])
    # A queued agent whose message was lost is stuck too, live workers or not.
    looked_at = stuck if live is None else stuck + queued
    stuck_ids = {n.agent_id for n in stuck}
    groups = {
        where: kept
        for where, group in _whereabouts(client, job_id, looked_at).items()
        if (kept := [n for n in group if n.agent_id in stuck_ids or where == LOST])
    }
    if not groups:  # with no worker answering, every queued agent is already counted stuck
        return _queued_unread(client, job_id, nodes)
    who = "no live worker runs them" if live is not None and live.answered else "no worker answers"
    unknown = "a live worker takes their tasks up once their worker's heartbeat lapses (COVEY_WORKER_HEARTBEAT_SECONDS)"
    return "\n".join(
        f"agents of job {job_id} stopped reporting ({who}): {_names(group)}; "
        + (unknown if where is None else f"each one's next message is {where}")
        for where, group in groups.items()
    )


def _queued_unread(client: Client, job_id: str, nodes: list[Node]) -> str | None:
    """Why queued agents do not start, when their messages wait in a queue no live
    worker reads (its workers gone mid-job): a line per such queue, naming them."""
    queued = [n for n in nodes if n.status is AgentStatus.QUEUED]
    expected = Outbox(client.redis).messages(job_id) if queued else {}
    by_queue: dict[str, list[Node]] = {}
    for node in queued:
        message = expected.get(node.agent_id)
        if message is not None and message.queue is not None:
            by_queue.setdefault(message.queue, []).append(node)
    read = queues_read(client) if by_queue else None
    lines = [
        f"agents of job {job_id} wait in queue {queue!r}, which no covey worker reads: {_names(group)}; "
        f"they start once one does (covey worker --queues {queue})"
        for queue, group in by_queue.items()
        if read is not None and queue not in read
    ]
    return "\n".join(lines) or None


def queues_read(client: Client, timeout: float = INSPECT_SECONDS) -> set[str] | None:
    """The queues the live workers read; None when no worker answers and, on a Redis
    broker, none still beats. A worker too busy to answer the broadcast's short wait
    that still beats reads the queues its catalog entry names."""
    replies = client.app.control.inspect(timeout=timeout).active_queues() or {}
    read = {str(q.get("name")) for queues in replies.values() for q in queues}
    broker = _redis_broker(client)
    silent: set[str] = set()
    if broker is not None:
        try:
            silent = {h.node for h in silent_workers(broker, set(replies)) if h.node is not None}
        finally:
            broker.close()
    if silent:
        read |= {q for entry in client.catalog.entries() if entry.worker in silent for q in entry.queues}
    return read if replies or silent else None


def _resume_due(nodes: list[Node]) -> set[str]:
    """The agents waiting on their children whose children have all finished: each
    one's resume is due (one that waits for a slot, a window or a person is not)."""
    children = by_parent(nodes)
    return {
        n.agent_id
        for n in nodes
        if n.status is AgentStatus.WAITING
        and n.wait is None
        and n.agent_id in children
        and all(c.final for c in children[n.agent_id])
    }


def _unstarted(client: Client, job_id: str) -> str | None:
    """Why a job with no tree and in no queue does not start: its message is held
    unacknowledged by no live worker's step, or is nowhere and its records are gone."""
    held = unacked(client, job_id)
    if not held and client.redis.exists(keys.submitted(job_id)):
        return None
    if (live := live_tasks(client)) is not None and job_id in live.task_ids:
        return None
    if held:
        return f"job {job_id} waits on its message, {held}"
    return (
        f"job {job_id} has no records in Redis (wiped, expired or never submitted) and no message "
        "in the broker: it will not finish"
    )


def wake_waiting(client: Client, job_id: str) -> list[Message]:
    """Send now, without its countdown, the next step of every agent of the job that
    waits for a scope's cap or window, so a cancel ends it at once. The counted-down
    copy, when its turn comes, finds its agent finished (or past that step) and is dropped."""
    waiting = {n.agent_id for n in client.tree.nodes(job_id) if n.wait is not None and not n.final}
    if not waiting:
        return []
    expected = Outbox(client.redis).messages(job_id)
    woken = [now for agent_id, m in expected.items() if agent_id in waiting and (now := m.now()) is not None]
    for message in woken:
        message.send(client.app)
    return woken


def _names(nodes: list[Node]) -> str:
    shown = ", ".join(n.agent_id for n in nodes[:STALLED_SHOWN])
    return shown + (f" and {len(nodes) - STALLED_SHOWN} more" if len(nodes) > STALLED_SHOWN else "")
