"""Each ledger script after its job's keys vanished mid-flow (a Redis wiped): it
refuses with ``StateLost`` or leaves the missing rows missing, and never leaves a
key without a TTL. This package's redis-server is emptied before each test, so
every key in it is one these tests wrote."""

from __future__ import annotations

import uuid

import pytest

from covey import keys
from covey.budgets.budget import Budget
from covey.errors import StateLost


@pytest.fixture
def job(ledger):
    job_id = f"job-{uuid.uuid4().hex}"
    ledger.open_root(job_id, "root", Budget(max_tokens=10_000, max_depth=2))
    assert ledger.open(job_id, ["root"], "root-sub-a", Budget(max_depth=1)).ok
    return job_id


def wipe(redis_client, job_id: str, *only: str) -> None:
    """Delete ``only`` of the job's keys, or all of them."""
    doomed = list(only) or list(redis_client.scan_iter(match=f"{keys.PREFIX}:{{{job_id}}}:*"))
    assert redis_client.delete(*doomed) == len(doomed)


def untimed(redis_client) -> dict[str, int]:
    """Every key of this server that is not set to expire, with its TTL (-1)."""
    found = {key: redis_client.ttl(key) for key in redis_client.scan_iter()}
    return {key: ttl for key, ttl in found.items() if ttl <= 0}


def test_open_under_a_lost_parent_is_refused_and_a_lost_agent_set_comes_back_with_its_ttl(ledger, job, redis_client):
    wipe(redis_client, job, keys.agents(job))
    assert ledger.open(job, ["root"], "root-sub-b", Budget(max_depth=1)).ok
    assert untimed(redis_client) == {}
    wipe(redis_client, job)
    with pytest.raises(StateLost, match="the ledger row of agent root is missing"):
        ledger.open(job, ["root"], "root-sub-c", Budget(max_depth=1))
    assert untimed(redis_client) == {}


def test_reserve_keeps_every_key_it_writes_expiring_and_refuses_for_lost_rows(ledger, job, redis_client):
    assert ledger.reserve(job, ["root", "root-sub-a"], [], "root-sub-a:0", 100, 1).ok
    assert untimed(redis_client) == {}  # the calls hash and the index of live reservations
    wipe(redis_client, job)
    with pytest.raises(StateLost, match="the ledger row of agent root-sub-a is missing"):
        ledger.reserve(job, ["root", "root-sub-a"], [], "root-sub-a:1", 100, 1)
    assert untimed(redis_client) == {}


def test_settle_of_a_call_whose_rows_vanished_is_refused_and_makes_no_row_again(ledger, job, redis_client):
    chain = ["root", "root-sub-a"]
    assert ledger.reserve(job, chain, [], "root-sub-a:0", 100, 1).ok
    wipe(redis_client, job)
    with pytest.raises(StateLost, match="the ledger row of agent root is missing"):
        ledger.settle(job, chain, [], "root-sub-a:0", 60, record='{"reply": "x"}')
    assert untimed(redis_client) == {}
    assert not redis_client.exists(keys.agent(job, "root"), keys.agent(job, "root-sub-a"), keys.calls(job))


def test_release_of_an_expired_hold_whose_rows_vanished_leaves_them_gone(ledger, job, clock, redis_client):
    chain = ["root", "root-sub-a"]
    assert ledger.reserve(job, chain, [], "root-sub-a:0", 100, 1).ok
    wipe(redis_client, job, *(keys.agent(job, a) for a in chain))
    clock.now += keys.RESERVATION_TTL_SECONDS + 1
    ledger.release_stale()
    assert untimed(redis_client) == {}
    assert not redis_client.exists(*(keys.agent(job, a) for a in chain))
    assert redis_client.zcard(keys.live_reservations()) == 0
