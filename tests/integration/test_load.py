"""Load: 500 jobs from 4 client processes at once, on one worker of 8 threads.

Every job completes exactly once, none is lost, and the global ledger scope (on a
fresh Redis, so it starts at 0) holds exactly the sum of what the jobs report.
"""

from __future__ import annotations

import multiprocessing

import pytest

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker
from tests.redis_server import RedisServer

PROCESSES = 4
JOBS_PER_PROCESS = 125
WAIT_SECONDS = 240  # for one process's last job: far past the expected run, never reached when healthy


def submit_and_collect(redis_url: str, process: int) -> list[tuple[str, str, str | None, int, int]]:
    """One client process: submit all its jobs, then wait for each; returns
    (job id, status, output, tokens, cycles) per job."""
    client = Client(Settings(redis_url=redis_url))
    handles = [
        client.submit(client.spec(f"What is {process} + {i}?", budget={"max_tokens": 20_000}))
        for i in range(JOBS_PER_PROCESS)
    ]
    rows = []
    for handle in handles:
        r = handle.result(timeout=WAIT_SECONDS)
        rows.append((handle.id, r.status.value, r.output, r.usage.total_tokens, r.usage.cycles))
    client.close()
    return rows


@pytest.mark.slow
def test_500_jobs_from_4_processes_complete_once_and_the_ledger_adds_up():
    with RedisServer() as redis_server:
        worker = start_worker(redis_server.url, concurrency=8, pool="threads")
        client = Client(Settings(redis_url=redis_server.url))
        try:
            wait_for_worker(client, worker)
            client.ledger.set_scope("global", 10**12, None)  # a scope is charged only where a cap exists
            with multiprocessing.get_context("spawn").Pool(PROCESSES) as pool:
                per_process = pool.starmap(submit_and_collect, [(redis_server.url, p) for p in range(PROCESSES)])
            rows = [row for process in per_process for row in process]

            assert len(rows) == PROCESSES * JOBS_PER_PROCESS
            assert len({job_id for job_id, *_ in rows}) == len(rows), "a job id was handed out twice"
            assert [status for _, status, *_ in rows] == ["completed"] * len(rows)
            expected = [str(p + i) for p in range(PROCESSES) for i in range(JOBS_PER_PROCESS)]
            assert [output for _, _, output, *_ in rows] == expected

            # Each ran once: its root's ledger row holds its own two calls, no replays of another run.
            for job_id, *_, tokens, cycles in rows:
                snap = client.job(job_id).ledger()
                assert (snap.tokens_used, snap.cycles_used, snap.tokens_reserved) == (tokens, cycles, 0)
                assert len(client.job(job_id).tree()) == 1

            (scope,) = [row for row in client.ledger.scope_rows() if row.name == "global"]
            assert scope.tokens_used == sum(tokens for *_, tokens, _ in rows)
            assert scope.cycles_used == sum(cycles for *_, cycles in rows)
            assert scope.tokens_reserved == 0
        finally:
            client.close()
            stop_worker(worker)
