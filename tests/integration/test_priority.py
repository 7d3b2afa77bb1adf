"""A job of priority 9 sent behind a backlog runs before the backlog drains, every
agent of it: its children and its resumes go at its priority too.

The backlog and the jobs behind it are queued before the worker (concurrency 1)
starts, so the order they run in is the broker's alone. Order is read from the
agents' recorded start and end on that one worker slot, never from durations.
"""

from __future__ import annotations

import uuid

from celery import Celery

from covey.client import Client
from covey.config.settings import Settings
from covey.store.tree import Node
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker
from tests.redis_server import RedisServer

BACKLOG = 40
TREE = "[sim:spawn width=2 depth=1] {}"  # a root, two children, and the root's resume after them
SLACK = 2  # backlog jobs that may start first: a worker may have taken one before the urgent job's next message


def test_a_priority_job_and_its_children_run_before_a_backlog_a_default_one_after_it():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        bare = Celery("elsewhere", broker=server.url)  # a Celery client that knows covey by its task name only
        bare.conf.update(task_serializer="json", task_default_queue="covey")
        try:
            backlog = [client.submit(client.spec(f"What is {i} + 1?", strategy="single")) for i in range(BACKLOG)]
            tree = {"budget": {"max_depth": 1}}
            urgent = client.submit(client.spec(TREE.format("urgent"), priority=9, **tree))
            wired = str(uuid.uuid4())  # its root's message has no priority; its spec's carries to its children
            bare.send_task(
                "covey.run_job", kwargs={"spec": {"task": TREE.format("wired"), "priority": 9, **tree}}, task_id=wired
            )
            usual = client.submit(client.spec(TREE.format("usual"), **tree))
            worker = start_worker(server.url, concurrency=1)
            try:
                wait_for_worker(client, worker)
                for handle in [urgent, client.job(wired), usual, *backlog]:
                    assert handle.result(timeout=120).ok
                starts = sorted(_root(h.tree()).started_at for h in backlog)
                for job in (urgent, client.job(wired)):
                    nodes = job.tree()
                    assert len(nodes) == 3
                    ended = _root(nodes).finished_at
                    assert sum(start < ended for start in starts) <= SLACK
                first = min(n.started_at for n in usual.tree())
                assert all(start < first for start in starts)  # the same priority: first come, first served
            finally:
                stop_worker(worker)
        finally:
            bare.close()
            client.close()


def _root(nodes: list[Node]) -> Node:
    return next(n for n in nodes if n.depth == 0)
