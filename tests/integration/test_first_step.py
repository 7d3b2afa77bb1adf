"""A job's first step, whose ``covey.run_job`` any Celery client may send (a covey
client records it in the job's outbox, a bare one does not): a root whose worker
dies in it is taken over and completes,
and a copy of its message sent meanwhile never stores a failure for it.

The root's ledger row names the delivery that holds the first step. A delivery
another worker put back (its holder's heartbeat lapsed) comes under a new tag;
the broker no longer holds the old one, so the new one takes the hold over. A
copy arriving while the holding delivery is still held is dropped: that delivery
either ends the step or is put back itself.
"""

from __future__ import annotations

import json
import signal
import time

import pytest
import redis

from covey import keys, wire
from covey.client import Client
from covey.config.deliveries import UNACKED, holder_of
from covey.config.settings import Settings
from tests.integration.conftest import start_covey_worker, stop_worker, wait_for_worker
from tests.integration.test_partition import wait_until
from tests.redis_server import RedisServer

SECONDS = 120


def holding(broker: redis.Redis, job_id: str) -> int | None:
    """The pid of the worker process holding the job's first message, unacknowledged."""
    for tag, record in broker.hgetall(UNACKED).items():
        if json.loads(record)[0]["headers"]["id"] == job_id:
            found = holder_of(broker, tag)
            return None if found is None else int(found[0].split(":")[1])
    return None


def in_flight(client: Client, job_id: str) -> bool:
    """The root's first model call is reserved and not yet settled."""
    return any(v.startswith("{") for v in client.redis.hvals(keys.calls(job_id)))


def settled(client: Client, job_id: str, result) -> None:
    """The ledger charged the job what its result says, and holds nothing back."""
    ledger = client.ledger.snapshot(job_id)
    assert ledger.tokens_reserved == 0
    assert ledger.tokens_used == result.usage.total_tokens
    assert not any(v.startswith("{") for v in client.redis.hvals(keys.calls(job_id)))


@pytest.mark.slow
def test_a_root_whose_worker_dies_in_its_first_model_call_completes_on_another():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        broker = redis.Redis.from_url(server.url, decode_responses=True)
        workers = [start_covey_worker(server.url, ["--processes", "1"]) for _ in range(2)]
        try:
            for worker in workers:
                wait_for_worker(client, worker)
            task = "[sim:latency 4000] What is 6 * 7?"
            clean = client.run(task, timeout=SECONDS)
            handle = client.submit(task)
            wait_until(lambda: in_flight(client, handle.id), "the root's first model call in flight", SECONDS)
            pid = holding(broker, handle.id)
            victim = next(w for w in workers if w.pid == pid)
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            result = handle.result(timeout=SECONDS)
            assert result.ok, result.error
            assert result.output == "42"
            assert [n.status for n in handle.tree()] == ["completed"]
            settled(client, handle.id, result)
            assert result.usage == clean.usage  # the call cut off was made again under its reservation, once
        finally:
            for worker in workers:
                stop_worker(worker)
            client.close()


@pytest.mark.slow
def test_a_copy_of_run_job_during_a_long_first_step_never_stores_a_failure():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        worker = start_covey_worker(server.url, ["--processes", "1", "--concurrency", "4"])
        try:
            wait_for_worker(client, worker)
            spec = client.spec("[sim:latency 45000] What is 6 * 7?", timeout=300)
            handle = client.submit(spec)
            wait_until(lambda: in_flight(client, handle.id), "the root's first model call in flight", SECONDS)
            client.app.send_task(wire.RUN_JOB, kwargs={"spec": spec.wire()}, task_id=handle.id, queue="covey")
            states = set()
            deadline = time.monotonic() + SECONDS
            while not handle.done():
                states.add(client.app.AsyncResult(handle.id).state)
                assert time.monotonic() < deadline, "the job did not end"
                time.sleep(0.2)
            assert "FAILURE" not in states
            result = handle.result(timeout=5)
            assert result.ok and result.output == "42"
            settled(client, handle.id, result)
            assert "another copy of its run_job runs the root's first step: this copy dropped" in (
                worker.log_path.read_text()
            )
        finally:
            stop_worker(worker)
            client.close()
