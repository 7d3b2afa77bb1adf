"""A worker killed mid-job loses nothing: another worker finishes it, charged once,
and every model call that was settled before the kill is replayed, not sent again."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest

from covey import keys
from covey.client import Client
from covey.config.settings import Settings
from covey.models.catalog import load
from tests.integration.conftest import (
    SIMHTTP,
    served_over_http,
    start_sim_server,
    start_worker,
    stop_worker,
    wait_for_worker,
)
from tests.redis_server import RedisServer

# Tasks of one-second slices and calls of at most 2 s, redelivered 6 s after a
# worker dies and looked for every second, so the test waits seconds, not minutes.
FAST_REDELIVERY = {
    "COVEY_SLICE_SECONDS": "1",
    "COVEY_MODEL_TIMEOUT": "2",
    "COVEY_MODEL_RETRIES": "0",
    "COVEY_VISIBILITY_TIMEOUT": "6",
    "COVEY_REDELIVERY_CHECK_SECONDS": "1",
}


def wait_until(condition, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def kill(worker) -> None:
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()


def assert_charged_once(client: Client, handle, result) -> None:
    ledger = client.ledger.snapshot(handle.id)
    assert ledger.tokens_used == result.usage.total_tokens
    assert ledger.cycles_used == result.usage.cycles
    assert ledger.tokens_reserved == 0


@pytest.mark.slow
def test_a_job_survives_its_worker_being_killed():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        first = start_worker(server.url, **FAST_REDELIVERY)
        wait_for_worker(client, first)
        handle = client.submit(client.spec("[sim:spawn width=2 depth=1] [sim:latency 300] What is 2 + 3?"))
        # kill it while a child's model call (300 ms) is in flight
        wait_until(
            lambda: (s := client.ledger.snapshot(handle.id)).cycles_used >= 2 and s.tokens_reserved > 0,
            "a child's call in flight",
        )
        kill(first)
        assert client.ledger.snapshot(handle.id).tokens_reserved > 0  # the call was cut off mid-step

        second = start_worker(server.url, **FAST_REDELIVERY)
        try:
            result = handle.result(timeout=120)
        finally:
            stop_worker(second)
        assert result.ok, result.error
        assert result.output == "leaves=2"
        assert [c.output for c in result.children] == ["5", "5"]
        assert_charged_once(client, handle, result)


@contextmanager
def counted_model():
    """A Redis, a sim-server that counts the calls reaching it (the model ``simhttp``
    of a models file), and a client."""
    with RedisServer() as server, tempfile.TemporaryDirectory() as directory:
        sim, base_url = start_sim_server(server.url)
        try:
            yield (
                server,
                Client(Settings(redis_url=server.url)),
                {**FAST_REDELIVERY, **served_over_http(Path(directory), base_url)},
            )
        finally:
            stop_worker(sim)


def model_calls(env) -> dict:
    base_url = str(load(Path(env["COVEY_MODELS"]))[SIMHTTP].base_url)  # where the worker sends its calls
    calls_url = base_url.removesuffix("/v1") + "/sim/calls"
    return httpx2.get(calls_url, timeout=5).json()


def calls_per_request(env) -> list[int]:
    return sorted(model_calls(env)["by_body"].values())


def run_killed(server, client, env, task: str, kill_when: str, calls_before: int):
    """Run ``task``, SIGKILL its worker while reservation ``kill_when`` is in flight
    (the model has received ``calls_before`` calls, that one included), and let a
    second worker finish it after redelivery."""
    first = start_worker(server.url, **env)
    wait_for_worker(client, first)
    handle = client.submit(client.spec(task, budget={"max_depth": 2}, model=SIMHTTP))
    wait_until(
        lambda: (
            (client.redis.hget(keys.calls(handle.id), kill_when) or "").startswith("{")
            and model_calls(env)["total"] == calls_before
        ),
        f"call {kill_when} in flight",
    )
    kill(first)
    second = start_worker(server.url, **env)
    try:
        return handle, handle.result(timeout=120)
    finally:
        stop_worker(second)


@pytest.mark.slow
def test_a_call_settled_before_the_kill_reaches_the_model_once():
    with counted_model() as (server, client, env):
        # root:1 asks for the calculator and is settled; root:2 is in flight at the kill.
        handle, result = run_killed(
            server, client, env, "[sim:latency 400] What is 2 + 3?", kill_when="root:2", calls_before=2
        )
        assert result.ok, result.error
        assert result.output == "5" and result.usage.cycles == 2
        # root:1 was replayed from the ledger; only the call cut off by the kill was sent again.
        assert calls_per_request(env) == [1, 2]
        assert_charged_once(client, handle, result)


@pytest.mark.slow
def test_a_redelivered_resume_replays_its_round_and_opens_the_same_children():
    with counted_model() as (server, client, env):
        # root:2 runs in the callback of round 1; the kill lands in it, so that callback is redelivered.
        task = "[sim:rounds 2] [sim:spawn width=2 depth=1] [sim:latency 400] go"
        handle, result = run_killed(server, client, env, task, kill_when="root:2", calls_before=4)
        assert result.ok, result.error
        assert result.output == "leaves=4"
        assert len({c.agent_id for c in result.children}) == 4
        assert len(handle.tree()) == 5  # the replayed round opened the same children, no others
        calls = calls_per_request(env)
        # 7 distinct calls (root 3, children 2 a round); only root:2, cut off by the kill, was sent twice
        assert calls == [1] * 6 + [2]
        assert_charged_once(client, handle, result)
        assert client.redis.keys(keys.checkpoint(handle.id, "*")) == []


@pytest.mark.slow
def test_an_agent_outlives_its_slices_and_its_worker():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        first = start_worker(server.url, **FAST_REDELIVERY)
        wait_for_worker(client, first)
        handle = client.submit(client.spec("[sim:loop] [sim:latency 300] spin", max_cycles=12))
        wait_until(lambda: client.ledger.snapshot(handle.id).cycles_used >= 5, "a few slices of calls")
        kill(first)
        second = start_worker(server.url, **FAST_REDELIVERY)
        try:
            result = handle.result(timeout=120)
        finally:
            stop_worker(second)
        # it lived past several one-second slices and one dead worker, and ran to its own cap
        assert (result.status.value, result.usage.cycles) == ("budget_exceeded", 12)
        assert result.error == "cycle cap reached: max_cycles=12 for this agent"
        assert_charged_once(client, handle, result)
