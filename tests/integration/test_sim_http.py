"""A worker whose model is ``covey sim-server`` over HTTP, as with any real endpoint."""

from __future__ import annotations

import pytest

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import start_sim_server, start_worker, stop_worker, wait_for_worker

QUEUE = "covey-http"


@pytest.fixture
def http_worker(redis_server):
    server, base_url = start_sim_server(redis_server.url)
    worker = start_worker(redis_server.url, COVEY_OPENAI_BASE_URL=base_url, COVEY_QUEUE=QUEUE)
    client = Client(Settings(redis_url=redis_server.url, queue=QUEUE))
    wait_for_worker(client, worker)
    yield client
    client.close()
    stop_worker(worker)
    stop_worker(server)


def test_a_tree_runs_against_the_sim_over_http(http_worker):
    client = http_worker
    result = client.submit(client.spec("[sim:spawn width=2 depth=1] [sim:fail 429] What is 5 * 5?")).result(timeout=60)
    assert result.ok, result.error
    assert result.output == "leaves=2"
    assert [c.output for c in result.children] == ["25", "25"]
