"""The same tree on each worker pool a user may choose."""

from __future__ import annotations

import pytest

from covey.client import Client
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker


@pytest.mark.parametrize("pool, concurrency", [("prefork", 2), ("gevent", 8), ("solo", 1)])
def test_a_tree_completes_on_every_pool(settings, redis_server, pool, concurrency):
    queue = f"covey-{pool}"
    client = Client(settings.model_copy(update={"queue": queue}))
    proc = start_worker(redis_server.url, concurrency=concurrency, pool=pool, COVEY_QUEUE=queue)
    try:
        wait_for_worker(client, proc)
        result = client.submit(client.spec("[sim:spawn width=2 depth=2] pools")).result(timeout=90)
    finally:
        stop_worker(proc)
        client.close()
    assert result.ok, result.error
    assert result.output == "leaves=4"
    assert result.usage.agents == 6
