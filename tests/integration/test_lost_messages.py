"""Never a lost child, never a wrong ``completed``: workers killed at exact points
(``COVEY_FAULT``, covey.config.faults) lose no message and make no answer up.

Each test kills a real worker where a message is most at risk: after a step saved
its checkpoint and before it sent its children; after a pop and before the
broker recorded the delivery; and twice, so that a waiting parent's message and
a finished child's are both delivered again. Another worker then finishes the job."""

from __future__ import annotations

import subprocess
import time

import pytest

from covey import keys
from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker
from tests.integration.test_durability import assert_charged_once, wait_until
from tests.redis_server import RedisServer

# Slices longer than any step here (no pause shifts a fault's count), dead workers'
# deliveries restored 6 s after they were made, lost messages looked for every second.
QUICK = {
    "COVEY_SLICE_SECONDS": "2",
    "COVEY_MODEL_TIMEOUT": "2",
    "COVEY_MODEL_RETRIES": "0",
    "COVEY_VISIBILITY_TIMEOUT": "6",
    "COVEY_REDELIVERY_CHECK_SECONDS": "1",
    "COVEY_RECONCILE_SECONDS": "1",
}


def killed_at(server: RedisServer, client: Client, fault: str, **env: str) -> subprocess.Popen:
    """A worker armed to SIGKILL itself at ``fault`` (with ``env`` besides), up before the job is sent."""
    worker = start_worker(server.url, **QUICK, **env, COVEY_FAULT=fault)
    wait_for_worker(client, worker)
    return worker


def next_killed_at(server: RedisServer, fault: str) -> subprocess.Popen:
    """A worker armed to SIGKILL itself at ``fault``, for a job already queued: it may die before it answers a ping."""
    return start_worker(server.url, **QUICK, COVEY_FAULT=fault)


def died(worker: subprocess.Popen) -> None:
    assert worker.wait(timeout=120) == -9, "the worker was not killed at its fault"


def finished_by_another(server: RedisServer, handle, seconds: float = 90, **env: str):
    """The job's result, from a worker (with ``env`` besides) started after the killed one."""
    worker = start_worker(server.url, **QUICK, **env)
    try:
        return handle.result(timeout=seconds)
    finally:
        stop_worker(worker)


def assert_whole(client: Client, handle, result, agents: int) -> None:
    """Completed, charged once, every node final, nothing left expected or waiting."""
    assert result.ok, result.error
    assert_charged_once(client, handle, result)
    assert len(handle.tree()) == agents and all(n.status.value == "completed" for n in handle.tree())
    assert client.redis.hlen(keys.expected(handle.id)) == 0
    assert client.redis.keys(keys.checkpoint(handle.id, "*")) == []


def killed_once(fault: str, task: str, max_depth: int, output: str, agents: int) -> None:
    """Run ``task`` on a worker killed at ``fault``; another worker must finish it whole."""
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        first = killed_at(server, client, fault)
        handle = client.submit(client.spec(task, budget={"max_depth": max_depth}))
        died(first)
        result = finished_by_another(server, handle)
        assert result.output == output
        assert_whole(client, handle, result, agents)


@pytest.mark.slow
def test_children_survive_a_kill_between_the_checkpoint_and_their_send():
    """Item 1: a resumed parent saves its next round and dies before sending it.
    The root checkpoints at round 1 (pass 1) and, resumed, at round 2 (pass 2): killed there."""
    killed_once("after_checkpoint:kill:2", "[sim:rounds 2] [sim:spawn width=2 depth=1] go", 2, "leaves=4", 5)


@pytest.mark.slow
def test_a_message_popped_at_a_kill_is_sent_again():
    """Item 3: the broker popped a grandchild's message and the worker died before
    the delivery was recorded; the message is nowhere but in the job's outbox.
    Pops: the root, its two children, then the first grandchild, lost with the worker."""
    killed_once("after_pop:kill:4", "[sim:spawn width=2 depth=2] go", 2, "leaves=4", 7)


@pytest.mark.slow
def test_a_job_popped_at_a_kill_is_sent_again():
    """The broker popped a job's run_job and the worker died before the delivery was
    recorded: the message is nowhere but where the client recorded it as it sent it."""
    killed_once("after_pop:kill:1", "[sim:spawn width=2 depth=1] go", 1, "leaves=2", 3)


@pytest.mark.slow
def test_a_resume_lost_with_the_last_child_is_sent_again():
    """The last child wrote its end, which made the parent's resume expected, and died
    before sending it."""
    killed_once("after_finish:kill:2", "[sim:spawn width=2 depth=1] go", 1, "leaves=2", 3)


@pytest.mark.slow
def test_a_waiting_parent_delivered_again_makes_no_answer_up():
    """Item 2: the root dies after sending its children; a second worker runs both
    and dies after the last one returned (its parent's resume sent). The root's own
    message comes back first, while it waits: it must not start the root again, take
    its children's ends back, or let the resume join children it reset."""
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        first = killed_at(server, client, "after_send:kill:1")
        handle = client.submit(client.spec("[sim:spawn width=2 depth=1] go", budget={"max_depth": 1}))
        died(first)
        delivered = min(score for _, score in client.redis.zrange("unacked_index", 0, -1, withscores=True))
        second = next_killed_at(server, "after_return:kill:2")
        died(second)
        # the root's delivery is past its visibility timeout (the children's are not):
        # the next worker's first look puts it back at the head of the queue
        wait_until(lambda: time.time() > delivered + float(QUICK["COVEY_VISIBILITY_TIMEOUT"]), "the root's redelivery")
        result = finished_by_another(server, handle)
        assert result.output == "leaves=2"
        assert_whole(client, handle, result, agents=3)


@pytest.mark.slow
def test_a_restore_lock_left_by_a_killed_worker_holds_redelivery_up_only_briefly():
    """The worker dies inside the broker's sweep for deliveries past their visibility
    timeout, leaving that sweep's lock standing as its config made it, and with the
    record of what it held gone, the sweep is the one way back: another worker still
    finishes the job, long before kombu's own lock (5 minutes) would have let it."""
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        first = start_worker(server.url, **QUICK)
        wait_for_worker(client, first)
        handle = client.submit(client.spec("[sim:latency 1500] What is 2 + 3?"))
        wait_until(lambda: client.ledger.snapshot(handle.id).tokens_reserved > 0, "the root's call in flight")
        first.kill()
        died(first)
        with client.app.connection_for_write() as conn:
            channel = conn.default_channel
            lock = channel.client.lock(channel.unacked_mutex_key, timeout=channel.unacked_mutex_expire)
            assert lock.acquire(blocking=False), "a sweep's lock already stood"  # as the killed worker's sweep took it
        for dead in client.redis.smembers(keys.workers()):
            client.redis.delete(keys.worker_held(dead))
        result = finished_by_another(server, handle)
        client.close()
    assert result.ok, result.error
    assert result.output == "5"
