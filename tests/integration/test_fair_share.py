"""Tenants share the workers: a scope's running cap holds across a real worker and
sim-server, an agent waiting for a cap or a window holds no worker slot and says
what it waits for, and a cancel ends waiting agents at once."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx2
import pytest

from covey import keys, wire
from covey.budgets.running import RunningSlots
from covey.client import Client, waits
from covey.config.settings import Settings
from covey.status import AgentStatus, JobStatus
from tests.integration.conftest import (
    ROOT,
    SIMHTTP,
    served_over_http,
    start_sim_server,
    start_worker,
    stop_worker,
    wait_for_worker,
    worker_env,
)
from tests.integration.test_durability import FAST_REDELIVERY, kill
from tests.redis_server import RedisServer

SLOTS = 4


def new_tenant(client: Client, **caps) -> str:
    """A tenant scope of its own with these caps; its bare name, as a spec gives it."""
    name = f"t{uuid.uuid4().hex[:8]}"
    client.ledger.set_scope(f"tenant:{name}", None, None, caps.get("tokens_per_minute"))
    if "max_running" in caps:
        RunningSlots(client.redis).set_cap(f"tenant:{name}", caps["max_running"])
    return name


def wait_until(condition, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def sim_calls(base_url: str) -> dict:
    return httpx2.get(base_url.removesuffix("/v1") + "/sim/calls", timeout=5).json()


@pytest.fixture(scope="module")
def fleet():
    """A Redis, a sim-server that answers each call in 800 ms and counts the calls in
    flight (model ``simhttp``), and one worker of 4 slots serving both it and the
    in-process ``sim``."""
    with RedisServer() as server, tempfile.TemporaryDirectory() as directory:
        sim, base_url = start_sim_server(server.url, COVEY_SIM_LATENCY_MS="800")
        env = served_over_http(Path(directory), base_url)
        worker = start_worker(server.url, concurrency=SLOTS, **env)
        client = Client(Settings(redis_url=server.url))
        try:
            wait_for_worker(client, worker)
            yield server, client, base_url, env
        finally:
            client.close()
            stop_worker(worker)
            stop_worker(sim)


def test_a_capped_tenant_never_runs_more_than_its_cap_and_a_small_tenant_is_not_queued_behind_it(fleet):
    _, client, base_url, _ = fleet
    big = new_tenant(client, max_running=2)
    small = new_tenant(client)
    httpx2.delete(base_url.removesuffix("/v1") + "/sim/calls")
    # The big tenant's 24 jobs go first, every one an 800 ms call to the counting
    # server; the small tenant's 6 follow on the in-process model.
    big_jobs = [client.submit(client.spec(f"What is {i} + 1?", tenant=big, model=SIMHTTP, tools=[])) for i in range(24)]
    small_jobs = [client.submit(client.spec(f"What is {i} + 2?", tenant=small, tools=[])) for i in range(6)]

    small_results = [job.result(timeout=120) for job in small_jobs]
    unfinished = sum(not job.done() for job in big_jobs)
    assert [r.status for r in small_results] == [AgentStatus.COMPLETED] * 6
    assert unfinished >= 12, "the small tenant's jobs waited behind the big tenant's"

    big_results = [job.result(timeout=300) for job in big_jobs]
    assert [r.output for r in big_results] == [str(i + 1) for i in range(24)]
    counts = sim_calls(base_url)
    assert counts["total"] == 24, {d: n for d, n in counts["by_body"].items() if n > 1}
    assert counts["most_in_flight"] == 2  # the cap, reached and never passed
    (row,) = [r for r in client.ledger.scope_rows() if r.name == f"tenant:{big}"]
    assert (row.running, row.running_limit) == (0, 2)  # every slot given back


def test_agents_waiting_on_a_window_hold_no_slot_say_so_and_end_at_once_on_cancel(fleet):
    server, client, _, env = fleet
    # One call fills the minute's window: the other jobs wait for the next one (a
    # minute may turn meanwhile: one more call fits, so 22 leave at least 20 waiting).
    windowed = new_tenant(client, tokens_per_minute=300)
    waiting = [
        client.submit(client.spec(f"What is {i} + 3?", tenant=windowed, tools=[], max_call_tokens=200))
        for i in range(22)
    ]
    wait_until(
        lambda: (
            sum(client.tree.node(j.id, "root") is not None and j.status() is JobStatus.WAITING for j in waiting) >= 20
        ),
        "20 jobs waiting on the window",
    )
    # 4 slots, 20 agents waiting: other jobs still run, because no wait holds a slot.
    others = [client.submit(client.spec(f"What is {i} * 2?", tools=[])) for i in range(2 * SLOTS)]
    assert [r.output for r in (j.result(timeout=120) for j in others)] == [str(i * 2) for i in range(2 * SLOTS)]
    still = [j for j in waiting if not j.done()]
    assert len(still) >= 20 - 1  # and another minute may have turned

    job = still[0]
    said = f"the per-minute window of scope tenant:{windowed} (tokens per minute), ~"
    shown = run_cli(server, env, "status", job.id)
    assert shown.stdout.strip() == "waiting"
    assert shown.stderr.startswith(f"waiting: {said}")
    assert f"waiting: {said}" in run_cli(server, env, "tree", job.id).stdout
    waited = run_cli(server, env, "result", job.id, "--timeout", "4")  # piped: no live line, said once
    assert waited.returncode == 3
    assert f"waiting: {said}" in waited.stderr

    (woken,) = waits.wake_waiting(client, job.id)  # what a cancel sends: its next step, at once
    assert woken.name == wire.PROCEED and "countdown" not in woken.options
    still = [j for j in waiting if not j.done()]
    for j in still:
        j.cancel()
    ended = [j.result(timeout=60) for j in still]
    # A minute may turn between the look and the cancel: one more call fits, and completes.
    assert sum(r.status is AgentStatus.CANCELLED for r in ended) >= len(still) - 1
    assert {r.status for r in ended} <= {AgentStatus.CANCELLED, AgentStatus.COMPLETED}
    assert client.redis.zcard(keys.scope_running(f"tenant:{windowed}")) == 0


@pytest.mark.slow
def test_a_step_longer_than_a_lease_keeps_its_slot(fleet):
    _, client, base_url, _ = fleet
    tenant = new_tenant(client, max_running=1)
    httpx2.delete(base_url.removesuffix("/v1") + "/sim/calls")
    seconds = keys.RUNNING_LEASE_SECONDS + 5  # the worker renews the lease meanwhile
    long = client.submit(client.spec(f"[sim:latency {seconds * 1000}] What is 5 + 5?", tenant=tenant, model=SIMHTTP))
    wait_until(lambda: sim_calls(base_url)["in_flight"] == 1, "the long call in flight")
    short = client.submit(client.spec("What is 6 + 6?", tenant=tenant, model=SIMHTTP, tools=[]))
    assert [long.result(timeout=120).output, short.result(timeout=120).output] == ["10", "12"]
    assert sim_calls(base_url)["most_in_flight"] == 1  # the short job never ran beside the long one


def run_cli(server, env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "covey", *args],
        env=worker_env(server.url, **env),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_an_agent_waiting_for_a_cap_survives_its_worker_being_killed():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        tenant = new_tenant(client, max_running=1)
        first = start_worker(server.url, concurrency=4, **FAST_REDELIVERY)
        try:
            wait_for_worker(client, first)
            holder = client.submit(client.spec("[sim:latency 1500] What is 1 + 1?", tenant=tenant, tools=[]))
            wait_until(lambda: client.ledger.snapshot(holder.id).tokens_reserved > 0, "the holder's call in flight")
            waiter = client.submit(client.spec("What is 2 + 2?", tenant=tenant, tools=[]))
            wait_until(
                lambda: (n := client.tree.node(waiter.id, "root")) is not None and n.wait is not None,
                "the second job waiting for the cap",
            )
            assert client.tree.node(waiter.id, "root").wait.reason == f"tenant:{tenant} running cap 1/1"
            kill(first)  # the holder's step and the waiter's counted-down message die with it
        finally:
            stop_worker(first)
        second = start_worker(server.url, concurrency=4, **FAST_REDELIVERY)
        try:
            results = [holder.result(timeout=120), waiter.result(timeout=120)]
        finally:
            stop_worker(second)
            client.close()
        assert [(r.status, r.output) for r in results] == [(AgentStatus.COMPLETED, "2"), (AgentStatus.COMPLETED, "4")]
        assert client.ledger.snapshot(holder.id).tokens_reserved == 0
