"""A tree interrupted mid-run by what a test does to its Redis, checked against a
clean run of the same spec: the same answer, the same charges, the worker alive
and in the workers' catalog."""

from __future__ import annotations

import re
from collections.abc import Callable

from covey.client import Client
from covey.client.errors import JobTimeout
from covey.config.settings import Settings
from tests.integration.conftest import start_covey_worker, stop_worker, wait_for_worker
from tests.integration.test_durability import assert_charged_once, wait_until

SPEC = "[sim:spawn width=3 depth=2] [sim:latency 400] interrupted"
SAID_SHOWN = 60  # the worker's last warnings and errors a timed-out wait shows
SAYING = re.compile(r"^\[[^]]*: (WARNING|ERROR|CRITICAL)/")  # a log line's level, as Celery formats it


def _charges(client: Client, job_id: str) -> tuple[int, int, int, int]:
    snap = client.ledger.snapshot(job_id)
    return snap.tokens_used, snap.cycles_used, snap.agents_spawned, snap.tokens_reserved


def _said(log: str) -> str:
    """The first line of each of the log's last warnings and errors, tracebacks left out."""
    lines = [line for line in log.splitlines() if SAYING.match(line)]
    return "\n".join(lines[-SAID_SHOWN:])


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
        try:
            result = handle.result(timeout=back_within)
        except JobTimeout as e:  # the worker's log goes with the test session: say what it said
            raise AssertionError(f"{e}\nthe worker said, last:\n{_said(worker.log_path.read_text())}") from e
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
