"""A job's run_job sent again under its id while the first copy runs (a service
retrying its submit, a duplicated publish) runs the root's first step once: the
model is called as often as in a clean run, and the copy ends without a trace.

A copy of a job's first message is the message its outbox expects, as the first
is, so nothing else tells the two apart: the root's ledger row names the delivery
that holds its first step.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import redis

from covey import keys, wire
from covey.client import Client
from covey.config.settings import Settings
from tests.broker_queues import queue_length
from tests.integration.conftest import (
    SIMHTTP,
    calls_reaching,
    served_over_http,
    start_sim_server,
    start_worker,
    stop_worker,
    wait_for_worker,
)
from tests.integration.test_partition import per_agent, wait_until
from tests.redis_server import RedisServer

# The root's first call takes 1.5 s: the copy arrives while it is in flight.
TASK = "[sim:spawn width=2 depth=1] [sim:latency 1500] go"
SECONDS = 60


def idle(broker: redis.Redis, queue: str) -> bool:
    """Nothing queued and nothing held: the copy (and its wait) has been dealt with."""
    return queue_length(broker, queue) == 0 and broker.hlen("unacked") == 0


def test_a_run_job_sent_again_while_its_root_runs_calls_the_model_once():
    with RedisServer() as server, tempfile.TemporaryDirectory() as directory:
        sim, base_url = start_sim_server(server.url)
        client = Client(Settings(redis_url=server.url))
        broker = redis.Redis.from_url(server.url, decode_responses=True)
        worker = start_worker(server.url, concurrency=4, **served_over_http(Path(directory), base_url))
        try:
            wait_for_worker(client, worker)
            spec = client.spec(TASK, model=SIMHTTP)
            clean = client.submit(spec)
            clean_result = clean.result(timeout=SECONDS)
            wait_until(lambda: idle(broker, client.settings.queue), "the clean job's tasks to end", SECONDS)
            before = calls_reaching(base_url)

            handle = client.submit(spec)
            wait_until(
                lambda: any(v.startswith("{") for v in client.redis.hvals(keys.calls(handle.id))),
                "the root's first model call in flight",
                SECONDS,
            )
            client.app.send_task(
                wire.RUN_JOB, kwargs={"spec": spec.wire()}, task_id=handle.id, queue=client.settings.queue
            )
            result = handle.result(timeout=SECONDS)
            wait_until(lambda: idle(broker, client.settings.queue), "the copy to be dealt with", SECONDS)

            assert result.ok and result.output == clean_result.output
            assert calls_reaching(base_url) - before == clean_result.usage.cycles
            assert per_agent(client, handle.id) == per_agent(client, clean.id)
            assert [n.agent_id for n in handle.tree()] == [n.agent_id for n in clean.tree()]
            assert "another copy of its run_job runs the root's first step" in worker.log_path.read_text()
            assert client.job(handle.id).result(timeout=5) == result
        finally:
            for proc in (worker, sim):
                stop_worker(proc)
            client.close()


def test_a_finished_job_sent_again_under_its_id_leaves_no_message_to_send_again(client):
    """Its root has opened: the copy is no message to look for (a reconciler would
    send it again every other look, each copy answered with the job's end)."""
    spec = client.spec("What is 1 + 1?")
    first = client.submit(spec)
    result = first.result(timeout=SECONDS)
    again = client.submit(spec, job_id=first.id)
    assert again.result(timeout=SECONDS) == result
    assert client.redis.hgetall(keys.expected(first.id)) == {}
