"""A tenant's jobs sent all at once spend its cap nearly to the end and never past it:
a call short only of what other calls in flight hold waits for them to settle
(giving its worker slot back) instead of being refused, and is refused only when
what is used leaves it no room. ``bench/contention.py`` measures the 60-job case."""

from __future__ import annotations

import uuid

import pytest

from covey.client import Client
from covey.config.settings import Settings
from covey.status import AgentStatus
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker
from tests.redis_server import RedisServer

JOBS = 30
TOKENS = 12_000  # about five jobs' worth: each reserves its prompt and a 4,096-token reply per call
DOLLARS = 0.0019  # as near to binding (the sim priced as below)
PRICE = '{"input": 0.15, "output": 0.6}'
SECONDS = 240


@pytest.mark.slow
def test_jobs_sent_at_once_spend_their_tenant_s_cap_to_the_end_and_never_past_it():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url, model="sim"))
        worker = start_worker(server.url, concurrency=JOBS, COVEY_SIM_PRICE=PRICE, COVEY_SIM_LATENCY_MS="200")
        try:
            wait_for_worker(client, worker)
            tenant = f"t{uuid.uuid4().hex[:8]}"
            client.ledger.set_scope(f"tenant:{tenant}", TOKENS, None, max_cost=DOLLARS)
            handles = [client.submit(client.spec(f"What is {i} + 1?", tenant=tenant)) for i in range(JOBS)]
            results = [h.result(timeout=SECONDS) for h in handles]
            (row,) = [r for r in client.ledger.scope_rows() if r.name == f"tenant:{tenant}"]
        finally:
            stop_worker(worker)
            client.close()
    statuses = {r.status for r in results}
    assert statuses <= {AgentStatus.COMPLETED, AgentStatus.BUDGET_EXCEEDED}, statuses
    assert sum(r.status is AgentStatus.COMPLETED for r in results) >= 3
    assert row.tokens_reserved == 0 and row.cost_reserved == 0  # every call settled
    assert row.tokens_used <= TOKENS and row.cost_used <= DOLLARS  # never past a cap
    # Spent to the end of whichever cap binds (before: about a quarter, the rest refused
    # while calls in flight held the room and gave it back a moment later).
    assert max(row.tokens_used / TOKENS, row.cost_used / DOLLARS) >= 0.9, row
    refused = [r.error for r in results if r.status is AgentStatus.BUDGET_EXCEEDED]
    assert all("exhausted" in (e or "") for e in refused), refused[:3]  # refused only for good
