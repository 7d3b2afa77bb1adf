"""The signing secret never sits in Redis: workers on this host share one kept in a
file only its owner reads, so a Redis wiped between jobs leaves them agreeing; a
worker whose broker is elsewhere needs ``COVEY_SECRET`` and says so."""

from __future__ import annotations

import stat
import subprocess
import sys

import pytest
import redis

from covey.client import Client
from covey.config.settings import Settings
from covey.worker import signing
from tests.integration.conftest import ROOT, start_worker, stop_worker, wait_for_worker, worker_env
from tests.redis_server import RedisServer

SPEC = "[sim:spawn width=8 depth=1] [sim:latency 400] What is 2 + 3?"
BUSY = "[sim:latency 3000] What is 1 + 1?"  # holds one worker's only slot while the other starts a tree


def values(r: redis.Redis) -> str:
    """Everything Redis holds in strings and hashes, as one text to search; bytes that
    are no text (a workspace's image) read as they decode, never failing the search."""
    kwargs = r.connection_pool.connection_kwargs
    raw = redis.Redis(host=kwargs.get("host", "localhost"), port=kwargs.get("port", 6379), db=kwargs.get("db", 0))
    held: list[bytes] = []
    try:
        for key in raw.scan_iter(count=1000):
            kind = raw.type(key)
            if kind == b"string":
                held.append(raw.get(key) or b"")
            elif kind == b"hash":
                held.extend([*raw.hkeys(key), *raw.hvals(key)])
    finally:
        raw.close()
    return "\n".join(value.decode("utf-8", "replace") for value in held)


@pytest.mark.slow
def test_workers_agree_on_a_secret_kept_outside_redis_after_a_wipe():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url, model="sim"))
        r = redis.Redis.from_url(server.url, decode_responses=True)
        first = start_worker(server.url)
        second = None
        try:
            wait_for_worker(client, first)
            before = client.run(client.spec(SPEC, budget={"max_depth": 2}), timeout=60)
            assert before.ok, before.error
            r.flushall()  # the test's own Redis: every key gone between two jobs
            # A worker started after the wipe: before, it made a new secret in Redis
            # and dropped every message the first worker signed (and the first its).
            second = start_worker(server.url)
            wait_for_worker(client, second)
            # One worker takes the busy leaf, the other the tree's root; the first
            # freed takes children the other signed.
            busy = client.submit(client.spec(BUSY))
            tree = client.submit(client.spec(SPEC, budget={"max_depth": 2}))
            result = tree.result(timeout=60)
            assert result.ok and result.output == before.output == "leaves=8", result.error
            assert busy.result(timeout=60).output == "2"
            secret = signing.host_secret(signing.secret_path()).decode()
            assert secret not in values(r)
            assert not [k for k in r.scan_iter(count=1000) if "secret" in k]
            assert stat.S_IMODE(signing.secret_path().stat().st_mode) == 0o600
        finally:
            for worker in (first, second):
                if worker is not None:
                    stop_worker(worker)
            client.close()
            r.close()
        logs = [w.log_path.read_text() for w in (first, second)]
        assert all(" succeeded in " in log for log in logs), "one worker ran the whole tree"
        assert not [line for log in logs for line in log.splitlines() if "refused" in line]


def test_a_worker_whose_broker_is_elsewhere_needs_covey_secret():
    elsewhere = "redis://:pw@192.0.2.1:6379/0"  # TEST-NET-1: never routed
    proc = subprocess.run(
        [sys.executable, "-m", "covey", "worker"],
        env=worker_env(elsewhere),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        (
            "Error: COVEY_SECRET is unset and the broker is not on this host: set COVEY_SECRET to the same random "
            "string on every worker (e.g. the output of `python -c 'import secrets; print(secrets.token_hex(32))'`)"
        )
    ]
