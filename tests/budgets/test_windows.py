"""Per-minute windows on global scopes, on a real redis-server with a set clock."""

from __future__ import annotations

import uuid

import pytest

from covey import keys
from covey.budgets.budget import Budget
from covey.status import Cause, CauseKind, Resource
from tests.budgets.conftest import Clock

MINUTE_START = 60 * 20_000  # an epoch minute's first second


@pytest.fixture
def clock():
    return Clock(MINUTE_START + 10)


@pytest.fixture
def tenant(ledger):
    name = f"tenant:{uuid.uuid4().hex[:8]}"
    ledger.set_scope(name, None, None, tokens_per_minute=600, requests_per_minute=3)
    return name


def opened(ledger) -> str:
    job = f"job-{uuid.uuid4().hex}"
    ledger.open_root(job, "root", Budget())
    return job


def test_a_full_token_window_answers_when_the_next_minute_opens(ledger, clock, tenant):
    job = opened(ledger)
    assert ledger.reserve(job, ["root"], [tenant], "root:1", 400, 100).tokens == 400
    full = ledger.reserve(job, ["root"], [tenant], "root:2", 400, 300)  # 200 left in this minute's window
    assert not full.ok and full.retry_after == 50
    assert f"scope {tenant} is at its 600 tokens per minute" == full.reason
    assert full.cause == Cause(
        kind=CauseKind.RATE_LIMITED, scope=tenant, resource=Resource.TOKENS_PER_MINUTE, retry_after=50
    )
    clock.now = MINUTE_START + 60
    assert ledger.reserve(job, ["root"], [tenant], "root:2", 400, 300).tokens == 400


def test_a_call_shrinks_to_the_room_left_in_the_window_rather_than_wait(ledger, redis_client, tenant):
    job = opened(ledger)
    assert ledger.reserve(job, ["root"], [tenant], "root:1", 400, 100).tokens == 400
    assert ledger.reserve(job, ["root"], [tenant], "root:2", 400, 100).tokens == 200  # all this minute has left
    window = keys.scope_window(tenant, MINUTE_START // 60)
    assert redis_client.hget(window, "tokens") == "600"


def test_the_window_counts_the_grant_not_the_later_usage(ledger, redis_client, tenant):
    job = opened(ledger)
    ledger.reserve(job, ["root"], [tenant], "root:1", 500, 100)
    ledger.settle(job, ["root"], [tenant], "root:1", 20)
    window = keys.scope_window(tenant, MINUTE_START // 60)
    assert redis_client.hgetall(window) == {"tokens": "500", "requests": "1"}
    assert 0 < redis_client.ttl(window) <= keys.WINDOW_TTL_SECONDS
    assert ledger.reserve(job, ["root"], [tenant], "root:2", 200, 150).retry_after is not None


def test_a_grant_never_exceeds_the_tokens_per_minute(ledger, tenant):
    assert ledger.reserve(opened(ledger), ["root"], [tenant], "root:1", 5000, 100).tokens == 600


def test_a_request_cap_makes_the_next_call_wait(ledger, tenant):
    job = opened(ledger)
    for i in range(3):
        assert ledger.reserve(job, ["root"], [tenant], f"root:{i}", 10, 1).ok
    late = ledger.reserve(job, ["root"], [tenant], "root:3", 10, 1)
    assert late.retry_after == 50 and "3 requests per minute" in late.reason
    assert (late.cause.kind, late.cause.scope, late.cause.resource) == (
        CauseKind.RATE_LIMITED,
        tenant,
        Resource.REQUESTS_PER_MINUTE,
    )


def test_a_call_bigger_than_the_window_is_refused_not_kept_waiting(ledger, tenant):
    grant = ledger.reserve(opened(ledger), ["root"], [tenant], "root:1", 900, 700)
    assert not grant.ok and grant.retry_after is None
    assert grant.reason == f"scope {tenant} allows 600 tokens per minute, one call needs 700"
    assert grant.cause == Cause(kind=CauseKind.BUDGET, scope=tenant, resource=Resource.TOKENS_PER_MINUTE)


def test_a_scope_without_window_caps_keeps_no_window(ledger, redis_client):
    name = f"tenant:{uuid.uuid4().hex[:8]}"
    ledger.set_scope(name, 10_000, None)
    assert ledger.reserve(opened(ledger), ["root"], [name], "root:1", 900, 1).tokens == 900
    assert not redis_client.exists(keys.scope_window(name, MINUTE_START // 60))


def test_set_scope_keeps_and_removes_window_caps(ledger, tenant):
    (row,) = [r for r in ledger.scope_rows() if r.name == tenant]
    assert (row.tokens_per_minute, row.requests_per_minute) == (600, 3)
    ledger.set_scope(tenant, 1000, None)
    (row,) = [r for r in ledger.scope_rows() if r.name == tenant]
    assert (row.tokens_limit, row.tokens_per_minute, row.requests_per_minute) == (1000, None, None)
    with pytest.raises(ValueError, match="tokens_per_minute cannot be negative"):
        ledger.set_scope(tenant, None, None, tokens_per_minute=-1)


def test_only_created_scopes_are_known(ledger, tenant):
    assert ledger.has_scope(tenant)
    assert not ledger.has_scope("tenant:never-created")
