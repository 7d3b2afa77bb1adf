"""A worker whose model is ``covey sim-server`` over HTTP, as with any real endpoint:
named ``simhttp`` in a models file, since ``sim`` itself is always in-process."""

from __future__ import annotations

import pytest

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import (
    SIMHTTP,
    calls_reaching,
    served_over_http,
    start_sim_server,
    start_worker,
    stop_worker,
    wait_for_worker,
)

QUEUE = "covey-http"


@pytest.fixture
def http_worker(redis_server, tmp_path):
    server, base_url = start_sim_server(redis_server.url)
    worker = start_worker(redis_server.url, COVEY_QUEUE=QUEUE, **served_over_http(tmp_path, base_url))
    client = Client(Settings(redis_url=redis_server.url, queue=QUEUE))
    wait_for_worker(client, worker)
    yield client, base_url
    client.close()
    stop_worker(worker)
    stop_worker(server)


def test_a_tree_runs_against_the_sim_over_http(http_worker):
    client, base_url = http_worker
    spec = client.spec("[sim:spawn width=2 depth=1] [sim:fail 429] What is 5 * 5?", model=SIMHTTP)
    result = client.submit(spec).result(timeout=60)
    assert result.ok, result.error
    assert result.output == "leaves=2"
    assert [c.output for c in result.children] == ["25", "25"]
    # every call went over HTTP: each of the 3 agents' first call answered 429, then retried
    assert calls_reaching(base_url) == result.usage.cycles + 3
