"""Money in the ledger: micro-dollars held at the worst case, settled at the reported cost."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest

from covey.budgets.budget import Budget
from covey.budgets.ledger import Pricing
from covey.budgets.prices import Price, micros
from covey.status import Cause, CauseKind, Resource

# USD per million tokens, so micro-dollars per token: a 100-token prompt costs at most 20, a reply token 1.
PRICE = Price(input=Decimal("0.15"), cached_input=Decimal("0.2"), output=Decimal("1"))


@pytest.fixture
def job():
    return f"job-{uuid.uuid4().hex}"


def priced(prompt: int, price: Price | None = PRICE) -> Pricing:
    return Pricing(model="m", price=price, prompt_tokens=prompt)


def test_the_worst_case_is_held_and_the_reported_cost_settled(ledger, job):
    ledger.open_root(job, "root", Budget(max_cost=0.001))  # 1000 micro-dollars
    grant = ledger.reserve(job, ["root"], [], "root:1", 100 + 300, 100 + 64, pricing=priced(100))
    assert (grant.tokens, grant.cost) == (400, 20 + 300)  # the prompt at the dearer input price, the whole reply
    snap = ledger.snapshot(job)
    assert (snap.cost_reserved, snap.cost_used, snap.cost_limit) == (320e-6, 0, 0.001)

    cost = PRICE.cost(prompt_tokens=90, completion_tokens=12, cached_tokens=40)
    assert cost == 28  # 50 * 0.15 + 40 * 0.2 + 12 * 1 = 27.5, rounded up
    assert ledger.settle(job, ["root"], [], "root:1", 102, cost=cost)
    snap = ledger.snapshot(job)
    assert (snap.cost_used, snap.cost_reserved) == (28e-6, 0)
    assert not ledger.settle(job, ["root"], [], "root:1", 102, cost=cost)  # once
    assert ledger.snapshot(job).cost_used == 28e-6


def test_the_reply_shrinks_to_what_the_money_left_buys(ledger, job):
    ledger.open_root(job, "root", Budget(max_cost=0.0001))  # 100 micro-dollars
    grant = ledger.reserve(job, ["root"], [], "root:1", 100 + 4096, 100 + 64, pricing=priced(100))
    assert grant.ok and (grant.tokens, grant.cost) == (100 + 80, 100)  # 20 for the prompt, 80 reply tokens


def test_too_little_money_for_a_useful_reply_is_refused_naming_the_row(ledger, job):
    scope = f"tenant:{uuid.uuid4().hex[:8]}"
    ledger.set_scope(scope, None, None, max_cost=0.00007)  # 70 micro-dollars
    ledger.open_root(job, "root", Budget(max_cost=1.0))
    grant = ledger.reserve(job, ["root"], [scope], "root:1", 100 + 4096, 100 + 64, pricing=priced(100))
    assert not grant.ok
    assert grant.cause == Cause(kind=CauseKind.BUDGET, scope=scope, resource=Resource.COST)
    assert grant.reason == f"cost budget exhausted at scope {scope} ($0.000070 left, $0.000084 needed)"
    assert ledger.snapshot(job).cost_reserved == 0


def test_a_cost_cap_refuses_a_model_without_prices_naming_it(ledger, job):
    ledger.open_root(job, "root", Budget(max_cost=1.0))
    grant = ledger.reserve(job, ["root"], [], "root:1", 500, 100, pricing=priced(100, price=None))
    assert not grant.ok and grant.cause.kind is CauseKind.INVALID_SPEC
    assert grant.reason == "model m has no prices in the models file, and agent root has a cost cap"


def test_without_a_cost_cap_a_model_without_prices_runs_and_costs_nothing(ledger, job):
    ledger.open_root(job, "root", Budget(max_tokens=1000))
    grant = ledger.reserve(job, ["root"], [], "root:1", 500, 100, pricing=priced(100, price=None))
    assert grant.ok and grant.cost == 0
    assert ledger.settle(job, ["root"], [], "root:1", 50)
    assert ledger.snapshot(job).cost_used == 0


def test_a_child_gets_no_more_money_than_its_parent_has_left(ledger, job):
    ledger.open_root(job, "root", Budget(max_cost=0.001, max_depth=2))
    ledger.reserve(job, ["root"], [], "root:1", 100 + 300, 164, pricing=priced(100))
    ledger.settle(job, ["root"], [], "root:1", 200, cost=400)
    opened = ledger.open(job, ["root"], "c1", Budget(max_cost=0.01, max_depth=1))
    assert opened.budget.max_cost == 0.0006
    assert ledger.agent(job, "c1").cost_limit == 0.0006


def test_a_dead_workers_cost_hold_is_released_with_its_tokens(ledger, job, clock):
    ledger.open_root(job, "root", Budget(max_cost=0.001))
    assert ledger.reserve(job, ["root"], [], "root:1", 400, 164, pricing=priced(100)).cost == 320
    clock.now += 10_000
    assert ledger.release_stale() == 1
    snap = ledger.snapshot(job)
    assert (snap.cost_reserved, snap.tokens_reserved, snap.cost_used) == (0, 0, 0)


def test_a_scope_cost_cap_holds_across_jobs(ledger):
    scope = f"sweep:{uuid.uuid4().hex[:8]}"
    ledger.set_scope(scope, None, None, max_cost=0.0005)
    spent, jobs, grant = 0, 0, None
    while grant is None or grant.ok:
        job = f"job-{uuid.uuid4().hex}"
        ledger.open_root(job, "root", Budget())
        grant = ledger.reserve(job, ["root"], [scope], "root:1", 100 + 200, 164, pricing=priced(100))
        if grant.ok:
            ledger.settle(job, ["root"], [scope], "root:1", grant.tokens, cost=grant.cost)
            spent, jobs = spent + grant.cost, jobs + 1
    assert grant.cause.resource is Resource.COST and jobs >= 1
    (row,) = [r for r in ledger.scope_rows() if r.name == scope]
    assert row.cost_used == spent / 1e6 <= 0.0005
    assert row.cost_limit == 0.0005


def test_caps_in_dollars_are_kept_in_whole_micro_dollars_never_rounded_up():
    assert micros(0.0000015) == 1
    assert micros(12.5) == 12_500_000
    assert PRICE.prompt_cost(3) == 1  # 0.6
    no_cached_price = Price(input=Decimal("0.15"), output=Decimal("0.6"))
    assert no_cached_price.cost(1000, 10, cached_tokens=500) == 156  # cached tokens at the input price


def test_money_held_by_a_call_in_flight_holds_the_next_up_until_it_settles(ledger, job):
    scope = f"tenant:{uuid.uuid4().hex[:8]}"
    ledger.set_scope(scope, None, None, max_cost=0.0002)  # 200 micro-dollars
    ledger.open_root(job, "root", Budget(max_cost=1.0))
    first = ledger.reserve(job, ["root"], [scope], "root:1", 100 + 4096, 100 + 64, pricing=priced(100))
    assert first.ok and first.cost == 200  # all of it, at the worst case
    held = ledger.reserve(job, ["root"], [scope], "root:2", 100 + 4096, 100 + 64, pricing=priced(100))
    assert not held.ok and held.retry_after is not None
    assert held.cause == Cause(kind=CauseKind.BUDGET, scope=scope, resource=Resource.COST, retry_after=held.retry_after)
    assert held.reason == (
        f"cost budget at scope {scope} held by calls in flight ($0.000000 left until they settle, $0.000084 needed)"
    )
    assert ledger.settle(job, ["root"], [scope], "root:1", 110, cost=25)
    assert ledger.reserve(job, ["root"], [scope], "root:2", 100 + 4096, 100 + 64, pricing=priced(100)).cost == 175
