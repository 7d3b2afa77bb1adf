"""A network partition: a worker cut off from Redis mid-tree, then reconnected,
finishes the job, charged once, and nothing waits forever.

The worker runs in its own network namespace (``tests.netns``) and reaches a
private ``redis-server`` (broker, result store and ledger alike) over a veth link
only; the test, the client, talks to that Redis over 127.0.0.1 and is never cut
off. Mid-tree, with model calls in flight, the link goes down for
``PARTITION_SECONDS`` (long enough for TCP to stall and back off, not to give up)
and comes back. In the second test a worker on the test's side of the cut takes
the silent worker's steps once its heartbeat lapses, and the cut-off worker,
back on the link, drops them. Needs root and network namespaces; skipped, saying
why, elsewhere.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from covey import keys
from covey.client import Client
from covey.client.errors import JobTimeout
from covey.config.deliveries import holders
from covey.config.settings import Settings
from covey.store.tree import Node
from tests.broker_queues import queue_length
from tests.integration.conftest import ROOT, start_worker, stop_worker, wait_for_worker, worker_env, worker_log
from tests.netns import Link, NetnsUnavailable, veth_namespace
from tests.redis_server import RedisServer

# 13 agents (a root, 3 children, 9 grandchildren), every model call 1 s: about 8 s
# on 4 threads, so the cut lands mid-tree.
TASK = "[sim:spawn width=3 depth=2] [sim:latency 1000] go"
AGENTS = 13
PARTITION_SECONDS = 20
CUT_TRIES = 3  # a cut that finds the worker holding nothing is undone and made again
RECOVERY_SECONDS = 180  # for the job after the link is back: far past the few seconds it has left
CLEAN_SECONDS = 120
WORKER_QUEUE, UNACKED = "covey", "unacked"  # kombu's Redis transport: the queue's list, the delivered-not-acked hash
# No agent task runs past 10 s + one 5 s call, so a 60 s visibility timeout never
# redelivers a healthy task, even one stalled through the whole partition, yet a
# message lost with a dropped connection comes back well within RECOVERY_SECONDS.
# One worker process (COVEY_WORKER_PROCESSES; older covey ignores it) of 4 threads.
# Its broker is across the link, not on loopback: it needs a COVEY_SECRET.
WORKER_ENV = {
    "COVEY_WORKER_PROCESSES": "1",
    "COVEY_SECRET": "partition-test-secret",
    "COVEY_SLICE_SECONDS": "10",
    "COVEY_MODEL_TIMEOUT": "5",
    "COVEY_MODEL_RETRIES": "0",
    "COVEY_VISIBILITY_TIMEOUT": "60",
    "COVEY_REDELIVERY_CHECK_SECONDS": "2",
}


class ReachableRedis(RedisServer):
    """A private redis-server listening on 127.0.0.1 and on the host's end of the link."""

    def __init__(self, also: str) -> None:
        super().__init__()
        self.also = also

    def listening(self) -> list[str]:
        # Bound to both from its start: no rebind while clients connect.
        return ["--bind", "127.0.0.1", self.also, "--protected-mode", "no"]  # the namespace is not loopback

    def url_at(self, host: str) -> str:
        return f"redis://{host}:{self.port}/0"


def start_worker_in(link: Link, redis_url: str) -> subprocess.Popen:
    """``covey worker`` (4 threads) inside the namespace, logging to a file of the session's."""
    log = worker_log("covey-worker-partition")
    proc = subprocess.Popen(
        link.exec_args(
            [sys.executable, "-m", "covey", "worker", "--concurrency", "4", "--pool", "threads", "--loglevel", "info"]
        ),
        env=worker_env(redis_url, **WORKER_ENV),
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    proc.log_path = Path(log.name)
    return proc


def reaches_redis(link: Link, redis_url: str) -> str | None:
    """None when a client inside the namespace gets a PONG from ``redis_url``, else why not."""
    probe = (
        f"import redis; print(redis.Redis.from_url({redis_url!r}, socket_timeout=5, socket_connect_timeout=5).ping())"
    )
    try:
        done = subprocess.run(link.exec_args([sys.executable, "-c", probe]), capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "no answer within 30 s"
    return None if done.stdout.strip() == "True" else (done.stderr.strip().splitlines() or ["no output"])[-1]


def wait_until(condition, what: str, seconds: float):
    """The condition's first truthy value, asserted to come within the bound."""
    deadline = time.monotonic() + seconds
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out after {seconds:.0f}s waiting for {what}"
        time.sleep(0.05)
    return value


def statuses(nodes: list[Node]) -> dict[str, str]:
    return {n.agent_id: n.status for n in nodes}


def per_agent(client: Client, job_id: str) -> dict[str, tuple[int, int, int]]:
    """Each agent's ledger row: (tokens used, cycles used, tokens reserved)."""
    return {
        a.agent_id: (a.tokens_used, a.cycles_used, a.tokens_reserved) for a in client.ledger.snapshot(job_id).agents
    }


def dump_stacks(worker: subprocess.Popen) -> None:
    """Have the worker write every thread's stack to its log (Celery's SIGUSR1 handler)."""
    if worker.poll() is None:
        os.kill(worker.pid, signal.SIGUSR1)
        time.sleep(2)


@pytest.fixture
def link():
    """A namespace on its own veth link, removed after the test; skips where none can be made."""
    try:
        with veth_namespace() as made:
            yield made
    except NetnsUnavailable as e:
        pytest.skip(f"no network namespace for a partition: {e}")


@pytest.mark.slow
def test_a_worker_cut_off_from_redis_mid_tree_finishes_the_job_once_the_link_returns(link):
    with ReachableRedis(also=link.host_address) as server:
        worker_url = server.url_at(link.host_address)
        unreachable = reaches_redis(link, worker_url)
        assert unreachable is None, f"Redis at {worker_url} unreachable from namespace {link.namespace}: {unreachable}"
        client = Client(Settings(redis_url=server.url))
        worker = start_worker_in(link, worker_url)
        log = worker.log_path
        try:
            wait_for_worker(client, worker)

            # The same tree on the same worker, never cut off: what the job costs.
            clean = client.submit(client.spec(TASK))
            clean_result = clean.result(timeout=CLEAN_SECONDS)
            assert clean_result.ok, clean_result.error
            assert clean_result.output == "leaves=9"
            clean_agents = per_agent(client, clean.id)
            assert len(clean_agents) == AGENTS

            handle = client.submit(client.spec(TASK))

            def mid_tree() -> bool:
                nodes = handle.tree()
                finished = sum(n.final for n in nodes)
                return 0 < finished < len(nodes) and handle.ledger().tokens_reserved > 0

            wait_until(mid_tree, "some agents finished, others running with a model call in flight", 60)
            at_cut = statuses(handle.tree())
            link.cut()
            try:
                time.sleep(1)  # what was on the wire at the cut has landed or is stuck
                cut_off = statuses(handle.tree())
                time.sleep(PARTITION_SECONDS - 1)
                # the worker really is cut off: nothing it does reaches Redis
                assert statuses(handle.tree()) == cut_off, "the tree moved while the link was down"
            finally:
                link.restore()
            restored = time.monotonic()

            try:
                result = handle.result(timeout=RECOVERY_SECONDS)
            except JobTimeout as e:
                dump_stacks(worker)
                pytest.fail(
                    f"the job did not finish within {RECOVERY_SECONDS}s of the link coming back after a "
                    f"{PARTITION_SECONDS}s partition: {e}\nat the cut: {at_cut}\nnow: {statuses(handle.tree())}\n"
                    f"ledger reserved: {handle.ledger().tokens_reserved}; worker alive: {worker.poll() is None}; "
                    f"worker log (thread stacks at the end): {log}"
                )
            took = time.monotonic() - restored
            assert result.ok, f"{result.status}: {result.error} (worker log: {log})"
            assert result.output == "leaves=9"

            # Charged once: the job costs what the clean run cost, agent by agent, nothing left reserved.
            assert result.usage == clean_result.usage, f"usage {result.usage} vs a clean run's {clean_result.usage}"
            snapshot = client.ledger.snapshot(handle.id)
            assert (snapshot.tokens_used, snapshot.cycles_used, snapshot.tokens_reserved) == (
                clean_result.usage.total_tokens,
                clean_result.usage.cycles,
                0,
            )
            assert per_agent(client, handle.id) == clean_agents

            # Nothing left behind: every agent of the tree ended, and no agent ran twice as another node.
            nodes = handle.tree()
            assert len(nodes) == AGENTS, statuses(nodes)
            assert {n.status for n in nodes} == {"completed"}, statuses(nodes)
            assert client.redis.keys(keys.checkpoint(handle.id, "*")) == []

            # The worker itself is back: it takes and finishes a new job.
            after = client.submit(client.spec("What is 2 + 3?"))
            try:
                fresh = after.result(timeout=60)
            except JobTimeout as e:
                dump_stacks(worker)
                pytest.fail(f"a job submitted after the partition did not finish within 60s: {e} (worker log: {log})")
            assert (fresh.ok, fresh.output) == (True, "5")
            assert worker.poll() is None, f"the worker exited with {worker.returncode} (log: {log})"
            # and the broker holds nothing back to run again later: no message queued or unacknowledged
            wait_until(
                lambda: queue_length(client.redis, WORKER_QUEUE) == 0 and client.redis.hlen(UNACKED) == 0,
                "the broker's queue and unacknowledged messages to empty",
                30,
            )
            print(f"job finished {took:.1f}s after a {PARTITION_SECONDS}s partition; worker log: {log}")
        finally:
            link.restore()
            stop_worker(worker)
            client.close()


def held_by(broker: redis.Redis, pid: int) -> frozenset[str]:
    """The deliveries worker process ``pid`` holds, as Redis records them."""
    return frozenset().union(*(h.tags for h in holders(broker) if h.id.split(":")[1] == str(pid)))


@pytest.mark.slow
def test_a_worker_cut_off_past_its_heartbeat_drops_the_steps_another_worker_took(link):
    with ReachableRedis(also=link.host_address) as server:
        client = Client(Settings(redis_url=server.url))
        cut_off = start_worker_in(link, server.url_at(link.host_address))
        other = None
        try:
            wait_for_worker(client, cut_off)
            clean = client.submit(client.spec(TASK))
            clean_result = clean.result(timeout=CLEAN_SECONDS)
            clean_agents = per_agent(client, clean.id)

            handle = client.submit(client.spec(TASK))
            for _ in range(CUT_TRIES):
                wait_until(
                    lambda: 0 < sum(n.final for n in handle.tree()) < AGENTS and handle.ledger().tokens_reserved > 0,
                    "some agents finished, others running with a model call in flight",
                    60,
                )
                link.cut()
                # Read on this side of the cut: what it held as the link went, and only that, is taken from it.
                if held_by(client.redis, cut_off.pid):
                    break
                link.restore()  # its calls in flight at the reading all ended before the cut: cut again
            else:
                pytest.fail(f"the worker held no delivery at any of {CUT_TRIES} cuts")
            try:
                # A worker on this side of the cut takes the silent worker's steps once its heartbeat lapses.
                other = start_worker(server.url, concurrency=4, **WORKER_ENV)
                time.sleep(PARTITION_SECONDS)
            finally:
                link.restore()
            result = handle.result(timeout=RECOVERY_SECONDS)
            assert result.ok, f"{result.status}: {result.error} (cut-off worker's log: {cut_off.log_path})"
            assert result.usage == clean_result.usage
            assert per_agent(client, handle.id) == clean_agents
            assert {n.status for n in handle.tree()} == {"completed"} and len(handle.tree()) == AGENTS
            # Back on the link, the cut-off worker drops the steps it was running: they were taken.
            wait_until(
                lambda: "this copy dropped" in cut_off.log_path.read_text(),
                "the cut-off worker to drop a step taken from it",
                RECOVERY_SECONDS,
            )
            assert cut_off.poll() is None, f"the cut-off worker exited (log: {cut_off.log_path})"
        finally:
            link.restore()
            for worker in (cut_off, other):
                if worker is not None:
                    stop_worker(worker)
            client.close()
