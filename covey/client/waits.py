"""Why a job is not moving: what a wait tells the user instead of waiting in silence.

A job can sit still for reasons no result will ever report: its message went to a
queue no covey worker reads, no worker reads covey's queue at all, a message its
outbox expects was lost (it is sent again here, as the workers' reconciler does),
or the worker running some of its agents died and the broker has not handed their
tasks to another one yet. Each is found from the broker, the workers' own answers
and the job's tree, and said in one line naming what is stuck; so is a job whose
records and messages are gone (a Redis wiped), which nothing will ever finish.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import redis

from covey import keys
from covey.config import connections
from covey.status import AgentStatus
from covey.store.outbox import Message, Outbox
from covey.store.tree import Node
from covey.worker.reconciler import Reconciler, send

if TYPE_CHECKING:
    from covey.client import Client

DEFAULT_CELERY_QUEUE = "celery"  # where a Celery client sends a task that names no queue
QUEUE_PEEK = 1000  # messages looked at per queue: enough for a queue someone is waiting on
INSPECT_SECONDS = 0.5  # how long workers get to answer an inspect broadcast
STALLED_SHOWN = 5  # agents named in a message; the rest are counted
LOOKS_APART_SECONDS = 1.0  # a message missing at two looks this far apart was lost, not on its way


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
            if broker.type(queue) != "list":
                continue
            for raw in broker.lrange(queue, -QUEUE_PEEK, -1):
                if _message_id(raw) == job_id:
                    return queue
    finally:
        broker.close()
    return None


def _message_id(raw: str) -> str | None:
    try:
        return json.loads(raw).get("headers", {}).get("id")
    except (ValueError, AttributeError):
        return None


def resend_lost(client: Client, job_id: str) -> list[Message]:
    """The job's expected messages that are in no queue and no unacknowledged set at
    two looks, sent again (on a Redis broker; else none)."""
    broker = _redis_broker(client)
    if broker is None:
        return []
    try:
        reconciler = Reconciler(client.redis, broker, [client.settings.queue], lambda m: send(client.app, m))
        reconciler.look([job_id])
        time.sleep(LOOKS_APART_SECONDS)
        return reconciler.look([job_id])
    finally:
        broker.close()


def live_task_ids(client: Client) -> set[str] | None:
    """Ids of the tasks live workers run or hold; None when no worker answers."""
    inspect = client.app.control.inspect(timeout=INSPECT_SECONDS)
    active, reserved = inspect.active(), inspect.reserved()
    if not active and not reserved:
        return None
    return {t["id"] for replies in (active or {}, reserved or {}) for tasks in replies.values() for t in tasks}


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
        if (
            queue is None
            and not client.redis.exists(keys.submitted(job_id))
            and job_id not in (live_task_ids(client) or ())
        ):
            return (
                f"job {job_id} has no records in Redis (wiped, expired or never submitted) and no message "
                "in the broker: it will not finish"
            )
        return None
    lost = resend_lost(client, job_id)
    if lost:
        agents = ", ".join(m.kwargs.get("agent_id") or m.kwargs.get("ctx", {}).get("agent_id", "?") for m in lost)
        return f"job {job_id} waited on {len(lost)} lost message(s), now sent again: {agents}"
    live = live_task_ids(client)
    stuck = [n for n in nodes if n.status is AgentStatus.RUNNING and (live is None or n.task_id not in live)]
    if live is None:
        stuck += [n for n in nodes if n.status is AgentStatus.QUEUED]
    if not stuck:
        return None
    who = "no worker answers" if live is None else "no live worker runs them"
    return (
        f"agents of job {job_id} stopped reporting ({who}): {_names(stuck)}; a live worker takes their "
        "tasks up once their worker's heartbeat lapses (COVEY_WORKER_HEARTBEAT_SECONDS)"
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
        send(client.app, message)
    return woken


def _names(nodes: list[Node]) -> str:
    shown = ", ".join(n.agent_id for n in nodes[:STALLED_SHOWN])
    return shown + (f" and {len(nodes) - STALLED_SHOWN} more" if len(nodes) > STALLED_SHOWN else "")
