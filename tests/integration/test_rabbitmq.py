"""Many machines: RabbitMQ as the broker, Redis as the result backend and ledger.

The job runs on a queue of its own on the RabbitMQ at 127.0.0.1:5672 (guest), which
the test deletes afterwards; it is skipped, saying so, where RabbitMQ does not answer.
"""

from __future__ import annotations

import uuid

import pytest
from kombu import Connection

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker

RABBITMQ = "amqp://guest:guest@127.0.0.1:5672//"


@pytest.fixture
def rabbitmq_queue():
    """A fresh queue name on a RabbitMQ that answers; the queue is deleted afterwards."""
    try:
        with Connection(RABBITMQ, connect_timeout=2) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as e:
        pytest.skip(f"RabbitMQ does not answer at amqp://guest@127.0.0.1:5672//: {e}")
    queue = f"covey-test-{uuid.uuid4().hex[:8]}"
    yield queue
    with Connection(RABBITMQ, connect_timeout=2) as conn:
        conn.default_channel.queue_delete(queue)


@pytest.mark.slow
def test_a_tree_runs_with_rabbitmq_as_broker_and_redis_as_ledger(redis_server, rabbitmq_queue):
    settings = Settings(redis_url=redis_server.url, broker_url=RABBITMQ, queue=rabbitmq_queue, model="sim")
    worker = start_worker(redis_server.url, COVEY_BROKER_URL=RABBITMQ, COVEY_QUEUE=rabbitmq_queue)
    client = Client(settings)
    try:
        wait_for_worker(client, worker)
        handle = client.submit(client.spec("[sim:spawn width=2 depth=1] over rabbit", budget={"max_depth": 2}))
        result = handle.result(timeout=60)
        assert result.ok and result.output == "leaves=2"
        assert sorted(node.depth for node in handle.tree()) == [0, 1, 1]  # the tree, in Redis
        assert handle.ledger().tokens_used == result.usage.total_tokens  # the ledger, in Redis
        with Connection(RABBITMQ, connect_timeout=2) as conn:
            # the messages went through RabbitMQ: the queue is there (passive: fails if not) ...
            conn.default_channel.queue_declare(rabbitmq_queue, passive=True)
        assert not client.redis.exists(rabbitmq_queue)  # ... and not through a Redis list
    finally:
        stop_worker(worker)
        client.close()


@pytest.mark.slow
def test_a_priority_job_and_its_children_pass_a_backlog_on_rabbitmq(redis_server, rabbitmq_queue):
    """The queue is declared with x-max-priority, and RabbitMQ serves higher numbers
    first: covey's priority goes as it is (covey.config.priorities)."""
    settings = Settings(redis_url=redis_server.url, broker_url=RABBITMQ, queue=rabbitmq_queue, model="sim")
    client = Client(settings)
    worker = None
    try:
        backlog = [client.submit(client.spec(f"What is {i} + 1?", strategy="single")) for i in range(20)]
        urgent = client.submit(client.spec("[sim:spawn width=2 depth=1] urgent", priority=9, budget={"max_depth": 1}))
        worker = start_worker(redis_server.url, COVEY_BROKER_URL=RABBITMQ, COVEY_QUEUE=rabbitmq_queue)
        wait_for_worker(client, worker)
        assert urgent.result(timeout=60).ok and all(h.result(timeout=60).ok for h in backlog)
        ended = next(n for n in urgent.tree() if n.depth == 0).finished_at
        starts = [next(n for n in h.tree() if n.depth == 0).started_at for h in backlog]
        assert sum(start < ended for start in starts) <= 2  # its two children and its resume went first too
    finally:
        if worker is not None:
            stop_worker(worker)
        client.close()
