"""A worker killed mid-job loses nothing: another worker finishes it, charged once."""

from __future__ import annotations

import os
import signal
import time

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker
from tests.redis_server import RedisServer

# Redeliver a dead worker's tasks after 6 s (twice the longest agent run), looked
# for every second, so the test waits seconds rather than the production hours.
FAST_REDELIVERY = {"COVEY_MAX_AGENT_SECONDS": "3", "COVEY_REDELIVERY_CHECK_SECONDS": "1"}


def test_a_job_survives_its_worker_being_killed():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        first = start_worker(server.url, **FAST_REDELIVERY)
        wait_for_worker(client, first)
        handle = client.submit(client.spec("[sim:spawn width=2 depth=1] [sim:latency 300] What is 2 + 3?"))
        deadline = time.monotonic() + 60
        while True:  # kill it while a child's model call (300 ms) is in flight
            snapshot = client.ledger.snapshot(handle.id)
            if snapshot.cycles_used >= 2 and snapshot.tokens_reserved > 0:
                break
            assert time.monotonic() < deadline, "the job never got going"
            time.sleep(0.01)
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        assert client.ledger.snapshot(handle.id).tokens_reserved > 0  # the call was cut off mid-step

        second = start_worker(server.url, **FAST_REDELIVERY)
        try:
            result = handle.result(timeout=120)
        finally:
            stop_worker(second)
        assert result.ok, result.error
        assert result.output == "leaves=2"
        assert [c.output for c in result.children] == ["5", "5"]
        ledger = client.ledger.snapshot(handle.id)
        assert ledger.tokens_used == result.usage.total_tokens
        assert ledger.cycles_used == result.usage.cycles
        assert ledger.tokens_reserved == 0
