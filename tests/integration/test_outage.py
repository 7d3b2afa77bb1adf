"""Redis restarted mid-tree (with its append-only file) is waited out by ``covey
worker`` as deployed, every flag at its default: the worker lives on, and the job
completes soon after Redis returns, charged exactly as a clean run."""

from __future__ import annotations

import time

import pytest

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import start_covey_worker, stop_worker, wait_for_worker
from tests.integration.test_durability import assert_charged_once, wait_until
from tests.redis_server import AofRedis

BACK_WITHIN_SECONDS = 60
DOWN_SECONDS = 5


@pytest.mark.slow
def test_a_tree_outlives_a_redis_restart_with_default_settings():
    with AofRedis() as server:
        client = Client(Settings(redis_url=server.url))
        worker = start_covey_worker(server.url, [])  # every flag and setting at its default
        try:
            wait_for_worker(client, worker)
            spec = client.spec("[sim:spawn width=3 depth=2] [sim:latency 400] outage")
            clean = client.run(spec, timeout=120)
            handle = client.submit(spec)
            wait_until(lambda: sum(n.final for n in client.tree.nodes(handle.id)) >= 2, "two agents finished")
            server.halt()
            time.sleep(DOWN_SECONDS)  # calls, settlements and acks meet a dead Redis meanwhile
            server.start()
            result = handle.result(timeout=BACK_WITHIN_SECONDS)  # the bound: a minute
            assert result.ok, result.error
            assert result.output == clean.output == "leaves=9"
            assert result.usage == clean.usage, "charged differently from a clean run"
            assert_charged_once(client, handle, result)
            assert worker.poll() is None, f"the worker exited with {worker.returncode}"
        finally:
            stop_worker(worker)
            client.close()
        log = worker.log_path.read_text()
        assert "crashed" not in log, log[-3000:]
        assert "Unrecoverable error" not in log and "exited" not in log, log[-3000:]
