"""Redis, the broker or the result store down, each alone, when a command starts: the
client says which in one line within seconds, and marks nothing as submitted that it
did not send. An outage met while waiting on a job is waited out instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from covey import keys
from covey.client import Client
from covey.client.errors import BROKER, REDIS, RESULT_STORE, JobTimeout, StoreUnavailable
from covey.config.settings import Settings
from tests.integration.conftest import ROOT, start_worker, stop_worker, wait_for_worker, worker_env
from tests.integration.test_durability import wait_until
from tests.integration.test_outage import DOWN_SECONDS
from tests.redis_server import AofRedis, refusing_port

FEW_SECONDS = 10  # python's start included; the client itself gives up after CLIENT_OUTAGE_SECONDS
PASSWORD = "hunter2"
SETTING = {REDIS: "redis_url", BROKER: "broker_url", RESULT_STORE: "result_backend"}
STORES = list(SETTING)


@pytest.fixture
def dead_url() -> Iterator[str]:
    """A port that refuses connections, with a password that must never be shown."""
    with refusing_port() as port:
        yield f"redis://:{PASSWORD}@127.0.0.1:{port}/0"


def urls(live: str, dead: str, store: str) -> dict[str, str]:
    """Every store at ``live`` but ``store``, at ``dead``."""
    return {name: dead if name == SETTING[store] else live for name in SETTING.values()}


def submitted(redis_client) -> set[str]:
    return set(redis_client.scan_iter(keys.submitted("*")))


def expected(redis_client) -> set[str]:
    """The jobs whose outbox holds a message (a client records its job's before sending it)."""
    return set(redis_client.scan_iter(keys.expected("*")))


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("command", [("run", "x"), ("submit", "x"), ("status", "j"), ("result", "j")])
@pytest.mark.slow
def test_a_store_down_is_one_line_naming_it_and_nothing_is_marked_submitted(
    redis_server, redis_client, dead_url, store, command
):
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}
    env.update({f"COVEY_{name.upper()}": url for name, url in urls(redis_server.url, dead_url, store).items()})
    before = submitted(redis_client)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "covey", *command], env=env, capture_output=True, text=True, timeout=60
    )
    assert time.monotonic() - started < FEW_SECONDS
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    masked = dead_url.replace(PASSWORD, "***")
    assert proc.stderr.startswith(f"Error: cannot reach {store} ({masked}): "), proc.stderr
    assert PASSWORD not in proc.stderr
    assert submitted(redis_client) == before


@pytest.mark.parametrize("store", STORES)
def test_the_python_client_raises_store_unavailable_and_leaves_nothing(redis_server, redis_client, dead_url, store):
    client = Client(Settings(**urls(redis_server.url, dead_url, store)))
    before, expecting = submitted(redis_client), expected(redis_client)
    started = time.monotonic()
    try:
        with pytest.raises(StoreUnavailable) as raised:
            client.submit("What is 1 + 1?")
    finally:
        client.close()
    assert time.monotonic() - started < FEW_SECONDS
    assert (raised.value.store, raised.value.url) == (store, dead_url.replace(PASSWORD, "***"))
    assert isinstance(raised.value, ConnectionError)
    assert submitted(redis_client) == before
    assert expected(redis_client) == expecting, "a job never sent is left for a reconciler to send"


@pytest.mark.slow
def test_a_wait_on_a_job_rides_out_a_redis_restart_and_says_it_waits(caplog):
    """``covey result`` and ``JobHandle.result``, waiting when Redis stops for a few
    seconds, wait for it (up to ``COVEY_REDIS_OUTAGE_SECONDS``), saying so, and get
    the job's result once it is back; the one-shot commands above still report at once."""
    with AofRedis() as server:
        client = Client(Settings(redis_url=server.url, model="sim", redis_outage_seconds=60))
        worker = start_worker(server.url)
        try:
            wait_for_worker(client, worker)
            handle = client.submit(client.spec("[sim:latency 6000] What is 2 + 3?"))  # subscribed to its result
            waited = ThreadPoolExecutor(1).submit(handle.result, timeout=120)
            cli = subprocess.Popen(
                [sys.executable, "-m", "covey", "result", handle.id, "--timeout", "120", "--json"],
                env=worker_env(server.url, COVEY_REDIS_OUTAGE_SECONDS="60"),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )
            channel = f"celery-task-meta-{handle.id}"
            wait_until(lambda: client.redis.pubsub_numsub(channel)[0][1] >= 2, "the CLI waiting on the result")
            server.halt()
            time.sleep(DOWN_SECONDS)  # both waits meet a dead Redis meanwhile
            server.start()
            stdout, stderr = cli.communicate(timeout=120)
            result = waited.result(timeout=120)
        finally:
            stop_worker(worker)
            client.close()
        assert cli.returncode == 0, stderr
        assert (result.status, result.output) == ("completed", "5"), result.error
        said = [r.getMessage() for r in caplog.records if r.name == "covey.client.outages"]
        assert said and said[0].startswith("waiting up to 60s for the result store to come back: cannot reach ")
        assert cli.returncode == 0, stderr
        assert json.loads(stdout)["output"] == "5"
        assert "warning: waiting up to 60s for the result store to come back: cannot reach " in stderr, stderr
        assert "Traceback" not in stderr


@pytest.mark.slow
def test_a_wait_that_runs_out_after_a_redis_restart_says_why_the_job_is_stuck_not_that_the_broker_is_away():
    """The restart closes the client's pooled broker connection: the diagnosis tries
    again on a fresh one instead of blaming a broker that is back."""
    with AofRedis() as server:
        client = Client(Settings(redis_url=server.url))
        try:
            handle = client.submit("What is 1 + 1?")  # no worker: it stays queued
            assert handle.why_stuck() is not None  # the broker connection is pooled now
            server.halt()
            time.sleep(1)
            server.start()
            with pytest.raises(JobTimeout, match="no worker reads queue 'covey'"):
                handle.result(timeout=2)
        finally:
            client.close()
