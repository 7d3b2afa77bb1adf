"""A tree interrupted mid-run by what a test does to its Redis, checked against a
clean run of the same spec: the same answer, the same charges, the worker alive
and in the workers' catalog."""

from __future__ import annotations

from collections.abc import Callable

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import start_covey_worker, stop_worker, wait_for_worker
from tests.integration.test_durability import assert_charged_once, wait_until

SPEC = "[sim:spawn width=3 depth=2] [sim:latency 400] interrupted"


def _charges(client: Client, job_id: str) -> tuple[int, int, int, int]:
    snap = client.ledger.snapshot(job_id)
    return snap.tokens_used, snap.cycles_used, snap.agents_spawned, snap.tokens_reserved


def outlives(settings: Settings, interrupt: Callable[[], None], back_within: float, **worker_env: str) -> str:
    """Run ``SPEC`` clean, then again with ``interrupt()`` once two agents have
    finished, on ``covey worker`` with every flag at its default; returns its log."""
    client = Client(settings)
    worker = start_covey_worker(settings.redis_url, [], **worker_env)
    try:
        wait_for_worker(client, worker)
        spec = client.spec(SPEC)
        first = client.submit(spec)
        clean = first.result(timeout=120)
        handle = client.submit(spec)
        wait_until(lambda: sum(n.final for n in client.tree.nodes(handle.id)) >= 2, "two agents finished")
        interrupt()  # calls, settlements and acks meet a Redis that is away meanwhile
        result = handle.result(timeout=back_within)
        assert result.ok, result.error
        assert result.output == clean.output == "leaves=9"
        assert result.usage == clean.usage, "charged differently from a clean run"
        assert_charged_once(client, handle, result)
        assert _charges(client, handle.id) == _charges(client, first.id), "the ledger differs from a clean run's"
        assert worker.poll() is None, f"the worker exited with {worker.returncode}"
        assert client.catalog.entries(settings.queue), "the worker is missing from the workers' catalog"
    finally:
        stop_worker(worker)
        client.close()
    log = worker.log_path.read_text()
    assert "crashed" not in log, log[-3000:]
    assert "Unrecoverable error" not in log and "exited" not in log, log[-3000:]
    return log
