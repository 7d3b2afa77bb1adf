"""Per-minute windows on a tenant scope through real workers, and the refusal of
jobs naming a tenant that was never created."""

from __future__ import annotations

import json
import uuid

import pytest

from covey import keys
from covey.client.errors import JobRefused
from covey.spec import InvalidSpec
from covey.status import AgentStatus
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker

TOKENS_PER_MINUTE = 300


def new_tenant() -> str:
    return f"t{uuid.uuid4().hex[:8]}"


def test_submit_refuses_a_tenant_never_created_and_says_how_to_create_it(client):
    tenant = new_tenant()
    with pytest.raises(
        InvalidSpec,
        match=rf"tenant: no ledger scope tenant:{tenant}; create it first with "
        rf"`covey scope tenant:{tenant} --max-tokens N`",
    ):
        client.submit(client.spec("What is 1 + 1?", tenant=tenant))
    assert not client.ledger.has_scope(f"tenant:{tenant}")


def test_a_worker_refuses_a_tenant_never_created(bare, client):
    tenant = new_tenant()
    sent = bare.send_task("covey.run_job", kwargs={"spec": {"task": "What is 1 + 1?", "tenant": tenant}})
    with pytest.raises(Exception, match=f"no ledger scope tenant:{tenant}"):
        sent.get(timeout=60)
    with pytest.raises(JobRefused, match="tenant"):
        client.job(sent.id).result(timeout=5)
    assert not client.redis.exists(keys.scope(f"tenant:{tenant}"))


def test_a_job_the_worker_refuses_leaves_no_message_to_send_again(client):
    """``send`` skips the checks ``submit`` makes: the worker refuses the job, and the
    message its client recorded as it sent it is dropped, not sent again and again."""
    tenant, job_id = new_tenant(), str(uuid.uuid4())
    client.send([(job_id, client.spec("What is 1 + 1?", tenant=tenant))])
    with pytest.raises(JobRefused, match="tenant"):
        client.job(job_id).result(timeout=60)
    assert client.redis.hgetall(keys.expected(job_id)) == {}


def test_covey_scope_sets_and_shows_the_window_caps(cli):
    name = f"tenant:{new_tenant()}"
    made = cli("scope", name, "--tokens-per-minute", "90000", "--requests-per-minute", "500", "--json")
    assert made.returncode == 0, made.stderr
    row = json.loads(made.stdout)
    assert (row["tokens_per_minute"], row["requests_per_minute"], row["tokens_limit"]) == (90000, 500, None)
    shown = cli("scope", name, "--max-tokens", "7").stdout
    assert shown.splitlines()[0].split()[-4:] == ["tokens/min", "requests/min", "running", "weight"]
    assert shown.splitlines()[1].split() == [name, "0", "7", "-", "-", "0", "-", "90000", "500", "0", "1"]
    capped = cli("scope", name, "--max-running", "2").stdout
    assert capped.splitlines()[1].split() == [name, "0", "7", "-", "-", "0", "-", "90000", "500", "0/2", "1"]
    assert json.loads(cli("scope", name, "--max-running", "none", "--json").stdout)["running_limit"] is None


@pytest.mark.slow
def test_two_jobs_sharing_a_window_on_two_workers_are_paced_and_both_complete(redis_server, client, cli):
    tenant = new_tenant()
    scope = f"tenant:{tenant}"
    assert cli("scope", scope, "--tokens-per-minute", str(TOKENS_PER_MINUTE)).returncode == 0
    second_worker = start_worker(redis_server.url)
    try:
        wait_for_worker(client, second_worker)
        # No tools and a small reply cap: each call reserves ~245 tokens (its prompt
        # counted as the sim bills, and the reply cap), so the window admits one call
        # a minute and has too little left for the second job's, which waits.
        jobs = [
            client.submit(client.spec(task, tenant=tenant, tools=[], max_call_tokens=200))
            for task in ("What is 2 + 2?", "What is 3 + 3?")
        ]
        results = [job.result(timeout=150) for job in jobs]
    finally:
        stop_worker(second_worker)
    assert [(r.status, r.output) for r in results] == [(AgentStatus.COMPLETED, "4"), (AgentStatus.COMPLETED, "6")]
    windows = [client.redis.hgetall(k) for k in client.redis.scan_iter(f"{keys.scope(scope)}:window:*")]
    assert len(windows) >= 2
    assert all(int(w["tokens"]) <= TOKENS_PER_MINUTE for w in windows)
    assert sum(int(w["requests"]) for w in windows) == sum(r.usage.cycles for r in results)
    (row,) = [r for r in client.ledger.scope_rows() if r.name == scope]
    assert row.tokens_used == sum(r.usage.total_tokens for r in results)
