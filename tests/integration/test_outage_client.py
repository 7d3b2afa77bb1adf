"""Redis, the broker or the result store down, each alone: the client says which in
one line within seconds, and marks nothing as submitted that it did not send."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from covey import keys
from covey.client import Client
from covey.client.errors import BROKER, REDIS, RESULT_STORE, StoreUnavailable
from covey.config.settings import Settings
from tests.redis_server import free_port

FEW_SECONDS = 10  # python's start included; the client itself gives up after CLIENT_OUTAGE_SECONDS
PASSWORD = "hunter2"
SETTING = {REDIS: "redis_url", BROKER: "broker_url", RESULT_STORE: "result_backend"}
STORES = list(SETTING)


@pytest.fixture
def dead_url() -> str:
    """A closed port, with a password that must never be shown."""
    return f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0"


def urls(live: str, dead: str, store: str) -> dict[str, str]:
    """Every store at ``live`` but ``store``, at ``dead``."""
    return {name: dead if name == SETTING[store] else live for name in SETTING.values()}


def submitted(redis_client) -> set[str]:
    return set(redis_client.scan_iter(keys.submitted("*")))


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("command", [("run", "x"), ("submit", "x"), ("status", "j"), ("result", "j")])
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
    before = submitted(redis_client)
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
