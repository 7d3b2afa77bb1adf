"""A Redis wiped while a job runs (``FLUSHALL`` on the test's own server): the job's
records are gone, so it ends ``failed`` with cause ``state_lost`` in one line, never
``internal``, and the clients say so instead of waiting. Nothing written after the
wipe is left without a TTL. A job whose message a worker still holds is not lost."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import redis
from kombu import Connection

from covey import keys
from covey.client import Client
from covey.client.errors import JobTimeout
from covey.config import broker, holder
from covey.config.settings import Settings
from covey.status import CauseKind
from covey.worker.heartbeat import Heartbeat
from covey.worker.reconciler import Reconciler
from covey.worker.takeover import take_over
from tests.broker_queues import queue_length
from tests.integration.conftest import ROOT, start_worker, stop_worker, wait_for_worker, worker_env
from tests.integration.test_durability import wait_until
from tests.redis_server import RedisServer

LEAF = "[sim:latency 3000] What is 2 + 3?"
TREE = "[sim:spawn width=2 depth=1] [sim:latency 3000] What is 2 + 3?"


def live_calls(r: redis.Redis, job_id: str) -> int:
    """Reservations of the job held by a model call in flight (not yet settled)."""
    return sum(v.startswith("{") for v in r.hvals(keys.calls(job_id)))


@pytest.mark.parametrize(
    "task, in_flight",
    [(LEAF, 1), (TREE, 2)],
    ids=["an agent mid-call", "children mid-call under a waiting root"],
)
@pytest.mark.slow
def test_a_job_whose_records_are_wiped_ends_failed_state_lost_and_clients_say_so(task, in_flight):
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url, model="sim"))
        r = redis.Redis.from_url(server.url, decode_responses=True)
        worker = start_worker(server.url, concurrency=2)
        try:
            wait_for_worker(client, worker)
            handle = client.submit(client.spec(task, budget={"max_depth": 2}))
            wait_until(lambda: live_calls(r, handle.id) == in_flight, f"{in_flight} model call(s) in flight")
            r.flushall()  # this test's own Redis, while the calls are in flight
            result = handle.result(timeout=60)
            cli = subprocess.run(
                [sys.executable, "-m", "covey", "result", handle.id, "--timeout", "60", "--json"],
                env=worker_env(server.url),
                capture_output=True,
                text=True,
                timeout=120,
                cwd=ROOT,
            )
            untimed = [k for k in r.scan_iter() if r.ttl(k) < 0]
        finally:
            stop_worker(worker)
            client.close()
            r.close()
        assert (result.status, result.cause.kind) == ("failed", CauseKind.STATE_LOST), result.error
        assert "internal" not in result.error and "\n" not in result.error
        assert "is missing" in result.error or "lost" in result.error
        shown = json.loads(cli.stdout)
        assert (shown["status"], shown["cause"]["kind"]) == ("failed", "state_lost"), cli.stderr
        assert untimed == []
        log = worker.log_path.read_text()
        assert "Traceback" not in log and "crashed" not in log


@pytest.mark.slow
def test_a_job_wiped_with_its_message_before_it_started_is_said_to_be_lost():
    """Nothing runs a job whose message went with the wipe: the clients say its
    records are gone instead of waiting in silence."""
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url, model="sim"))
        r = redis.Redis.from_url(server.url, decode_responses=True)
        worker = start_worker(server.url)  # one slot, which the busy job holds
        try:
            wait_for_worker(client, worker)
            busy = client.submit(client.spec(LEAF))
            queued = client.submit(client.spec("What is 1 + 1?"))
            wait_until(lambda: live_calls(r, busy.id) == 1, "the busy job's call in flight")
            r.flushall()  # this test's own Redis: the queued job's message goes with it
            assert busy.result(timeout=60).cause.kind is CauseKind.STATE_LOST
            with pytest.raises(JobTimeout) as waited:
                queued.result(timeout=5)
            cli = subprocess.run(
                [sys.executable, "-m", "covey", "result", queued.id, "--timeout", "5"],
                env=worker_env(server.url),
                capture_output=True,
                text=True,
                timeout=120,
                cwd=ROOT,
            )
        finally:
            stop_worker(worker)
            client.close()
            r.close()
        assert waited.value.reason == (
            f"job {queued.id} has no records in Redis (wiped, expired or never submitted) and no message "
            "in the broker: it will not finish"
        )
        assert cli.returncode == 1 and cli.stderr.splitlines() == [
            f"Error: unknown job {queued.id}: never submitted, expired, or lost (a Redis restart without persistence)"
        ], cli.stderr


@pytest.mark.parametrize("records", ["kept", "gone"])
def test_a_job_whose_message_a_live_worker_holds_unacknowledged_is_said_to_wait_for_its_redelivery(records):
    """A live worker process (this one, beating) took the job's message off the queue
    and runs no step of it: the wait names the holder and what gives the message
    back (the live workers' visibility timeout, not the client's), never that it is
    lost, whether the job's records are kept or gone."""
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url, model="sim"))
        r = redis.Redis.from_url(server.url, decode_responses=True)
        handle = client.submit(client.spec("What is 1 + 1?"))  # no worker yet: it waits in the queue
        if records == "gone":
            r.delete(keys.submitted(handle.id))
        me = holder.current()
        Heartbeat(r, me, seconds=60, kept_seconds=600).beat()
        with Connection(server.url, transport=broker.transport(server.url)) as mine:
            taken = mine.default_channel.basic_get(client.settings.queue, no_ack=False)
            worker = start_worker(server.url, COVEY_VISIBILITY_TIMEOUT="900")  # the client's is its default
            try:
                wait_for_worker(client, worker)
                wait_until(lambda: client.catalog.entries(), "the worker's catalog entry")
                with pytest.raises(JobTimeout) as waited:
                    handle.result(timeout=1)
            finally:
                stop_worker(worker)
                client.close()
                r.close()
        assert taken.headers["id"] == handle.id
        assert waited.value.reason.startswith(
            f"job {handle.id} waits on its message, held unacknowledged by worker {me.id} (alive), which does "
            "not run it: the broker delivers it again once its visibility timeout (900s, the shortest "
            "COVEY_VISIBILITY_TIMEOUT of the live workers) has passed since its delivery"
        ), waited.value.reason


def test_a_started_agent_whose_message_a_live_worker_holds_is_said_to_wait_for_its_redelivery():
    """The root started, its worker died, and its message, put back by takeover, was
    taken by a live worker process (this one, beating) that runs no step of it: the
    wait names that holder and what gives the message back, never that a heartbeat
    will lapse."""
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url, model="sim"))
        r = redis.Redis.from_url(server.url, decode_responses=True)
        worker = start_worker(server.url)
        try:
            wait_for_worker(client, worker)
            handle = client.submit(client.spec("[sim:latency 60000] What is 1 + 1?"))
            wait_until(
                lambda: (node := client.tree.node(handle.id, "root")) is not None and node.status == "running",
                "the root to start",
            )
            (dead,) = r.smembers(keys.workers())
        finally:
            worker.kill()
            worker.wait()
        r.delete(keys.worker_alive(dead))
        me = holder.current()
        Heartbeat(r, me, seconds=60, kept_seconds=600).beat()
        with Connection(server.url, transport=broker.transport(server.url)) as mine:
            assert take_over(mine.default_channel, dead) == 1
            taken = mine.default_channel.basic_get(client.settings.queue, no_ack=False)
            try:
                with pytest.raises(JobTimeout) as waited:
                    handle.result(timeout=1)
            finally:
                client.close()
                r.close()
        assert taken is not None
        assert waited.value.reason.startswith(
            f"agents of job {handle.id} stopped reporting (no worker answers): root; each one's next message is "
            f"held unacknowledged by worker {me.id} (alive), which does not run it: the broker delivers it again"
        ), waited.value.reason


def test_a_parent_whose_resume_a_live_worker_holds_is_said_to_wait_for_its_redelivery():
    """The child finished and its worker died before sending the waiting root's resume;
    the resume, sent again, was taken by a live worker process (this one, beating)
    that runs none of it: the wait names the root and that holder, not nothing."""
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url, model="sim"))
        r = redis.Redis.from_url(server.url, decode_responses=True)
        worker = start_worker(server.url, COVEY_FAULT="after_finish:kill")
        try:
            wait_for_worker(client, worker)
            handle = client.submit(client.spec("[sim:spawn width=1 depth=1] go"))
            assert worker.wait(timeout=60) == -9, "the worker was not killed as its child finished"
            with pytest.raises(JobTimeout) as lost:
                handle.result(timeout=1)
            assert queue_length(r, client.settings.queue) == 0  # the client only looked: it sent nothing
            reconciler = Reconciler(r, r, [client.settings.queue], lambda m: m.send(client.app))
            assert reconciler.look() == []  # what a worker's reconciler does: missing at one look ...
            assert len(reconciler.look()) == 1  # ... and at the next, so it is sent again
            me = holder.current()
            Heartbeat(r, me, seconds=60, kept_seconds=600).beat()
            with Connection(server.url, transport=broker.transport(server.url)) as mine:
                taken = mine.default_channel.basic_get(client.settings.queue, no_ack=False)
                with pytest.raises(JobTimeout) as held:
                    handle.result(timeout=1)
            statuses = [n.status.value for n in handle.tree()]
        finally:
            stop_worker(worker)
            client.close()
            r.close()
    assert lost.value.reason == (
        f"agents of job {handle.id} stopped reporting (no worker answers): root; each one's next message is "
        "in no queue and no unacknowledged set: a worker's reconciler sends it again"
    )
    assert taken is not None and taken.headers["task"] == "covey.resume"
    assert statuses == ["waiting", "completed"]
    assert held.value.reason.startswith(
        f"agents of job {handle.id} stopped reporting (no worker answers): root; each one's next message is "
        f"held unacknowledged by worker {me.id} (alive), which does not run it: the broker delivers it again"
    ), held.value.reason
