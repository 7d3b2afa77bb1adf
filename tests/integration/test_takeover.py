"""A dead worker's tasks go on in seconds, on the Redis broker, with default settings;
a worker that was only stopped drops what was taken from it, and runs no step twice.

Each worker process beats in Redis and records the deliveries it holds; another
worker puts a process's deliveries back on their queues once its heartbeat lapses
(covey.worker.takeover), instead of after the visibility timeout (minutes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis
from kombu.utils.json import loads

from covey import keys
from covey.client import Client
from covey.config.settings import Settings
from tests.broker_queues import queued
from tests.integration.conftest import (
    SIMHTTP,
    calls_reaching,
    served_over_http,
    start_covey_worker,
    start_sim_server,
    stop_worker,
    wait_for_worker,
)
from tests.integration.test_partition import per_agent, wait_until
from tests.processes import children
from tests.redis_server import RedisServer

# 13 agents, every model call 1 s: a kill lands mid-tree with calls in flight.
TASK = "[sim:spawn width=3 depth=2] [sim:latency 1000] go"
AGENTS = 13
KILLS = 3
JOB_SECONDS = 120  # a job's bound, kills included: far past the seconds a takeover takes
QUEUE, UNACKED = (
    "covey",
    "unacked",
)  # kombu's Redis transport: the queue's list; Redis transport: delivery tag -> [message, exchange, routing key]


def held(broker: redis.Redis) -> dict[int, dict[str, str]]:
    """Worker process id -> the deliveries it holds (tag -> task id), as Redis records them."""
    found: dict[int, dict[str, str]] = {}
    for holder in broker.smembers(keys.workers()):
        tags = sorted(broker.smembers(keys.worker_held(holder)))
        records = broker.hmget(UNACKED, tags) if tags else []
        pid = int(holder.split(":")[1])
        found[pid] = {t: loads(r)[0]["headers"]["id"] for t, r in zip(tags, records) if r is not None}
    return found


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def went_on(broker: redis.Redis, taken: dict[str, str]) -> bool:
    """Every task a dead process held was taken up by a live one: its old delivery is
    gone from the unacknowledged records and it waits in no queue (a live worker holds
    it, or has already run it)."""
    waiting = {loads(m)["headers"]["id"] for m in queued(broker, QUEUE)}
    old = broker.hmget(UNACKED, list(taken)) if taken else []
    return all(record is None for record in old) and not waiting & set(taken.values())


def mid_tree(broker: redis.Redis, handle) -> dict[int, dict[str, str]]:
    """Some agents finished, others held by a worker with a model call in flight: the
    deliveries held at that moment (empty when the tree is not there yet)."""
    if not 0 < sum(n.final for n in handle.tree()) < AGENTS:
        return {}
    holding = {pid: tasks for pid, tasks in held(broker).items() if tasks}
    return holding if holding and handle.ledger().tokens_reserved > 0 else {}


SETTLE_SECONDS = 0.2  # a stopped process's last commands, already sent, still reach Redis after the stop


def settled(read):
    """What ``read`` reads of Redis about stopped processes, once two readings
    ``SETTLE_SECONDS`` apart agree: the commands they sent before the stop have landed."""
    before = read()
    deadline = time.monotonic() + JOB_SECONDS
    while True:
        time.sleep(SETTLE_SECONDS)
        now = read()
        if now == before:
            return now
        assert time.monotonic() < deadline, "stopped processes' commands still landing"
        before = now


def start_default_worker(url: str, client: Client, *flags: str) -> subprocess.Popen:
    worker = start_covey_worker(url, list(flags))
    wait_for_worker(client, worker)
    return worker


def assert_as_clean(client: Client, handle, result, clean_result, clean_agents) -> None:
    """Completed, every agent charged what a clean run charged it, nothing left reserved."""
    assert result.ok, result.error
    assert result.output == "leaves=9"
    assert result.usage == clean_result.usage
    assert per_agent(client, handle.id) == clean_agents
    assert {n.status for n in handle.tree()} == {"completed"} and len(handle.tree()) == AGENTS
    assert client.redis.keys(keys.checkpoint(handle.id, "*")) == []


def kill_mid_tree(client: Client, broker: redis.Redis, workers: list[subprocess.Popen]):
    """Submit the tree, SIGKILL the worker holding one of its tasks while a model call
    is in flight, and wait for its tasks to go on. Returns the job, the seconds from
    its end to its tasks going on (None if it died holding none), and the worker killed.

    The worker and its processes are stopped (SIGSTOP: its end, as the others see it)
    before what they hold is read, so nothing they hold is let go between the reading
    and the kill; a worker found holding nothing is let go on (SIGCONT), and the tree
    looked at again."""
    handle = client.submit(client.spec(TASK))
    while True:
        holding = wait_until(lambda: mid_tree(broker, handle), "the tree half done, model calls in flight", JOB_SECONDS)
        pid = max(holding, key=lambda p: len(holding[p]))
        victim = next(w for w in workers if w.pid in (pid, parent_of_or_none(pid)))
        family = [victim.pid, *children(victim.pid)]  # its processes die with it
        stopped = time.monotonic()
        for p in family:
            os.kill(p, signal.SIGSTOP)
        holds = settled(lambda: held(broker))
        taken = {tag: task for p, tasks in holds.items() if p in family for tag, task in tasks.items()}
        if taken:
            break
        for p in family:
            os.kill(p, signal.SIGCONT)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    # What it still held once dead, as the settled reading had it.
    orphans = dict(zip(taken, broker.hmget(UNACKED, list(taken)) if taken else []))
    taken = {tag: task for tag, task in taken.items() if orphans[tag] is not None}
    wait_until(lambda: went_on(broker, taken), "the dead worker's tasks to go on", JOB_SECONDS)
    return handle, (time.monotonic() - stopped if taken else None), victim


@pytest.mark.slow
def test_a_killed_worker_s_tasks_go_on_in_seconds_with_default_settings():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        broker = redis.Redis.from_url(server.url, decode_responses=True)
        workers = [start_default_worker(server.url, client) for _ in range(2)]  # no flags: a process per core
        try:
            clean = client.submit(client.spec(TASK))
            clean_result = clean.result(timeout=JOB_SECONDS)
            clean_agents = per_agent(client, clean.id)
            for _ in range(KILLS):
                handle, seconds, victim = kill_mid_tree(client, broker, workers)
                if seconds is not None:
                    print(f"takeover seconds: {seconds:.2f}")  # read by bench/trials.py --figure
                result = handle.result(timeout=JOB_SECONDS)
                assert_as_clean(client, handle, result, clean_result, clean_agents)
                workers.remove(victim)
                workers.append(start_default_worker(server.url, client))
        finally:
            for worker in workers:
                stop_worker(worker)
            client.close()


def parent_of_or_none(pid: int) -> int | None:
    try:
        return parent_of(pid)
    except FileNotFoundError:  # gone already
        return None


def started_at(pid: int) -> str | None:
    """The process's start time (its /proc stat field), which tells it from a later one of the same pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]
    except FileNotFoundError:
        return None


def children_of(pid: int) -> list[tuple[int, str | None]]:
    """Each child process of ``pid``, with its start time."""
    return [
        (int(e.name), started_at(int(e.name)))
        for e in Path("/proc").iterdir()
        if e.name.isdigit() and parent_of_or_none(int(e.name)) == pid
    ]


def kill_if_same(pid: int, started: str | None) -> None:
    if started is not None and started_at(pid) == started:
        os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_killed_prefork_worker_s_tasks_go_on_charged_as_a_clean_run():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        broker = redis.Redis.from_url(server.url, decode_responses=True)
        workers = [start_default_worker(server.url, client, "--pool", "prefork") for _ in range(2)]
        pool = {w.pid: children_of(w.pid) for w in workers}  # the processes that run its tasks
        try:
            clean = client.submit(client.spec(TASK))
            clean_result = clean.result(timeout=JOB_SECONDS)
            handle, seconds, victim = kill_mid_tree(client, broker, workers)
            assert seconds is not None, "the worker died holding no task"
            print(f"takeover seconds: {seconds:.2f}")
            result = handle.result(timeout=JOB_SECONDS)
            assert_as_clean(client, handle, result, clean_result, per_agent(client, clean.id))
            workers.remove(victim)
        finally:
            for worker in workers:
                stop_worker(worker)
            for pid, started in (child for children in pool.values() for child in children):
                kill_if_same(pid, started)  # a killed worker's pool processes, if they outlived it
            client.close()


def test_a_stopped_worker_resumed_after_its_tasks_were_taken_runs_no_step_twice():
    with RedisServer() as server, tempfile.TemporaryDirectory() as directory:
        sim, base_url = start_sim_server(server.url)
        env = served_over_http(Path(directory), base_url)
        client = Client(Settings(redis_url=server.url))
        broker = redis.Redis.from_url(server.url, decode_responses=True)
        first = start_covey_worker(server.url, ["--processes", "1"], **env)  # one process: the one that beats
        second = None
        try:
            wait_for_worker(client, first)
            clean = client.submit(client.spec(TASK, model=SIMHTTP))
            clean_result = clean.result(timeout=JOB_SECONDS)
            clean_agents = per_agent(client, clean.id)
            clean_calls = calls_reaching(base_url)

            handle = client.submit(client.spec(TASK, model=SIMHTTP))
            wait_until(lambda: mid_tree(broker, handle), "the tree half done, model calls in flight", JOB_SECONDS)
            os.kill(first.pid, signal.SIGSTOP)
            try:
                stopped_with, in_flight = settled(
                    lambda: (
                        held(broker)[first.pid],
                        sum(v.startswith("{") for v in client.redis.hvals(keys.calls(handle.id))),
                    )
                )
                second = start_covey_worker(server.url, ["--processes", "1"], **env)
                wait_until(
                    lambda: went_on(broker, stopped_with),
                    "the stopped worker's tasks to go on elsewhere",
                    JOB_SECONDS,
                )
            finally:
                os.kill(first.pid, signal.SIGCONT)
            result = handle.result(timeout=JOB_SECONDS)
            assert_as_clean(client, handle, result, clean_result, clean_agents)
            # Only the calls cut off by the stop reached the model again; the resumed
            # worker made none of its own: the steps it was running when stopped were dropped.
            assert clean_calls <= calls_reaching(base_url) - clean_calls <= clean_calls + in_flight
            dropped = first.log_path.read_text().count("this copy dropped")
            assert 1 <= dropped <= len(stopped_with), f"{dropped} dropped of {len(stopped_with)} taken"
            assert first.poll() is None, "the resumed worker exited"
        finally:
            for worker in (first, second, sim):
                if worker is not None:
                    stop_worker(worker)
            client.close()
