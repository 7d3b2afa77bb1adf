"""Tenants weighted 3:1 waiting for a shared running cap are admitted about 3:1,
through a real worker: ``covey scope tenant:a --weight 3``."""

from __future__ import annotations

import subprocess
import sys
import uuid

from covey.client import Client
from covey.status import AgentStatus
from tests.integration.conftest import ROOT, own_worker, worker_env
from tests.integration.test_fair_share import wait_until

JOBS = 16  # each tenant's
FIRST = 16  # admissions counted: a weighted 3:1 gets 12 of them, an even split 8


def covey(server, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "covey", *args], env=worker_env(server.url), capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def waiting(client: Client, scope: str) -> int:
    return next(r.waiting for r in client.ledger.scope_rows() if r.name == scope)


def test_tenants_waiting_for_a_shared_cap_are_admitted_in_proportion_to_their_weights():
    with own_worker(concurrency=4) as (server, client):
        heavy, light = f"a{uuid.uuid4().hex[:6]}", f"b{uuid.uuid4().hex[:6]}"
        shown = covey(server, "scope", f"tenant:{heavy}", "--weight", "3")
        assert shown.splitlines()[0].split()[-1] == "weight" and shown.splitlines()[1].split()[-1] == "3"
        covey(server, "scope", f"tenant:{light}", "--max-tokens", "none")
        covey(server, "scope", "global", "--max-running", "0")  # every job waits until all have queued
        jobs = {
            job.id: tenant
            for i in range(JOBS)
            for tenant in (light, heavy)  # the light tenant first each time: the turns, not arrival, decide
            for job in [client.submit(client.spec(f"What is {i} + 1?", tenant=tenant, tools=[]))]
        }
        wait_until(lambda: waiting(client, "global") == 2 * JOBS, "every job queued on global")
        covey(server, "scope", "global", "--max-running", "1")  # one at a time: admissions in order
        results = {job_id: client.job(job_id).result(timeout=180) for job_id in jobs}
    assert {r.status for r in results.values()} == {AgentStatus.COMPLETED}
    admitted = sorted(results, key=lambda job_id: results[job_id].finished_at)
    got = sum(jobs[job_id] == heavy for job_id in admitted[:FIRST])
    assert FIRST * 3 / 4 - 1 <= got <= FIRST * 3 / 4 + 1, [jobs[j] for j in admitted]
