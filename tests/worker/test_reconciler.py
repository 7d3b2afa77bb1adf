"""The reconciler on a private Redis (no worker's reconciler shares it): it looks for
an expected message on the queue the message names, which need not be its own."""

from __future__ import annotations

import json

import redis

from covey.store.checkpoints import Checkpoints
from covey.store.outbox import Message
from covey.store.tree import Node
from covey.worker.reconciler import Reconciler
from tests.redis_server import RedisServer

JOB = "job-reconciled"


def test_a_message_queued_on_its_jobs_queue_is_left_alone_and_sent_again_once_lost():
    """A proceed of a sweep's job waits in ``covey-sweeps`` behind the sweep's backlog,
    looked at by a reconciler whose own queue is ``covey``."""
    then = Message(
        "covey.proceed",
        "task-root",
        {"job_id": JOB, "agent_id": "root", "step": 1},
        {"queue": "covey-sweeps", "kwargsrepr": f"job={JOB} agent=root step=1"},
    )
    queued = {"headers": {"id": then.task_id, "task": then.name, "kwargsrepr": then.options["kwargsrepr"]}}
    with RedisServer() as server:
        store = redis.Redis.from_url(server.url, decode_responses=True)
        assert Checkpoints(store, 600).save(
            JOB, "root", 1, "{}", None, then=then, node=Node(agent_id="root", depth=0, status="running")
        )
        store.lpush("covey-sweeps", json.dumps(queued))
        sent: list[Message] = []
        reconciler = Reconciler(store, store, ["covey"], sent.append)
        assert [reconciler.look(), reconciler.look(), reconciler.look()] == [[], [], []]

        store.delete("covey-sweeps")  # popped, and lost before it was recorded unacknowledged
        assert [reconciler.look(), reconciler.look()] == [[], [then]]
        store.close()
    assert sent == [then]
