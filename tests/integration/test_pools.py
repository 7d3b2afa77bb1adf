"""The same tree on each worker pool a user may choose."""

from __future__ import annotations

import pytest

from covey.client import Client
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker


@pytest.mark.parametrize("pool, concurrency", [("prefork", 2), ("gevent", 8), ("solo", 1)])
@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("pool", ["threads", "gevent"])
def test_500_slots_run_a_wide_tree_without_connection_errors(settings, redis_server, pool):
    """Every slot busy at once (900 leaves, each in a 1 s model call): the Redis,
    broker and result-store pools hold a connection per slot, or make a slot wait."""
    queue = f"covey-wide-{pool}"
    client = Client(settings.model_copy(update={"queue": queue}))
    proc = start_worker(redis_server.url, concurrency=500, pool=pool, COVEY_QUEUE=queue)
    try:
        wait_for_worker(client, proc)
        spec = client.spec(
            "[sim:spawn width=30 depth=2] [sim:latency 1000] wide",
            budget={"max_agents": 1000, "max_tokens": 10**8, "max_cycles": 10**5, "max_depth": 2},
        )
        result = client.submit(spec).result(timeout=300)
    finally:
        stop_worker(proc)
        client.close()
    assert result.ok, result.error
    assert (result.output, result.usage.agents) == ("leaves=900", 930)
    log = proc.log_path.read_text()
    for error in ("MaxConnectionsError", "ConnectionError", "OperationalError", "Traceback"):
        assert error not in log, log[log.find(error) - 2000 :][:4000]


@pytest.mark.parametrize("pool", ["threads", "gevent"])
def test_a_worker_reuses_its_result_store_connections_from_task_to_task(settings, redis_server, redis_client, pool):
    """A greenlet is a thread to Celery: a gevent worker that kept a result store
    per thread opened a new Redis connection for every task it ran."""
    queue = f"covey-reuse-{pool}"
    client = Client(settings.model_copy(update={"queue": queue}))
    proc = start_worker(redis_server.url, concurrency=4, pool=pool, COVEY_QUEUE=queue)
    jobs = 20
    try:
        wait_for_worker(client, proc)
        client.submit("warm-up").result(timeout=60)
        before = redis_client.info("stats")["total_connections_received"]
        results = [client.submit(f"job {i}").result(timeout=60) for i in range(jobs)]
        opened = redis_client.info("stats")["total_connections_received"] - before
    finally:
        stop_worker(proc)
        client.close()
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    assert opened < jobs / 2, f"{opened} connections opened for {jobs} jobs"
