"""Running caps on global scopes, on a real redis-server with a set clock."""

from __future__ import annotations

import uuid

import pytest

from covey import keys
from covey.budgets.running import RunningSlots


@pytest.fixture
def slots(redis_client, clock):
    return RunningSlots(redis_client, clock=clock)


@pytest.fixture
def tenant(slots):
    name = f"tenant:{uuid.uuid4().hex[:8]}"
    slots.set_cap(name, 2)
    return name


def test_a_scope_lets_as_many_agents_run_as_its_cap_and_names_itself_when_full(slots, tenant):
    assert slots.take("j1", "root", ["global", tenant]).held == (tenant,)
    assert slots.take("j2", "root", ["global", tenant]).ok
    full = slots.take("j3", "root", ["global", tenant])
    assert (full.ok, full.scope, full.running, full.limit) == (False, tenant, 2, 2)
    assert full.reason == f"{tenant} running cap 2/2"
    assert slots.running(tenant) == 2


def test_a_step_taken_again_holds_its_one_slot(slots, tenant):
    assert slots.take("j1", "root", [tenant]).ok
    assert slots.take("j1", "root", [tenant]).ok  # a redelivered step: the same agent
    assert slots.running(tenant) == 1
    assert slots.take("j2", "root", [tenant]).ok


def test_a_slot_given_back_is_free_for_the_next_agent(slots, tenant):
    slots.take("j1", "root", [tenant])
    slots.take("j2", "root", [tenant])
    slots.give_back("j1", "root", [tenant])
    assert slots.take("j3", "root", [tenant]).ok


def test_a_slot_whose_lease_lapsed_is_free_and_a_renewed_one_is_not(slots, tenant, clock):
    slots.take("j1", "root", [tenant])  # its worker dies: no renewal
    slots.take("j2", "root", [tenant])
    clock.now += keys.RUNNING_LEASE_SECONDS / 2
    slots.renew([("j2", "root", (tenant,))])
    clock.now += keys.RUNNING_LEASE_SECONDS / 2 + 1
    assert slots.running(tenant) == 1
    assert slots.take("j3", "root", [tenant]).ok
    assert not slots.take("j4", "root", [tenant]).ok  # j2's renewed lease still holds


def test_a_refused_take_holds_nothing_on_the_other_scopes(slots, tenant):
    other = f"tenant:{uuid.uuid4().hex[:8]}"
    slots.set_cap(other, 5)
    slots.take("j1", "root", [tenant])
    slots.take("j2", "root", [tenant])
    assert not slots.take("j3", "root", [other, tenant]).ok
    assert slots.running(other) == 0


def test_a_scope_without_a_cap_counts_nothing(slots, redis_client):
    taken = slots.take("j1", "root", ["global"])
    assert taken.ok and taken.held == ()
    assert not redis_client.exists(keys.scope_running("global"))


def test_every_running_set_lives_one_lease(slots, tenant, redis_client):
    slots.take("j1", "root", [tenant])
    assert 0 < redis_client.ttl(keys.scope_running(tenant)) <= keys.RUNNING_LEASE_SECONDS


def test_the_cap_shows_in_the_scope_rows_and_none_removes_it(slots, tenant, ledger):
    slots.take("j1", "root", [tenant])
    (row,) = [r for r in ledger.scope_rows() if r.name == tenant]
    assert (row.running, row.running_limit) == (1, 2)
    slots.set_cap(tenant, None)
    (row,) = [r for r in ledger.scope_rows() if r.name == tenant]
    assert row.running_limit is None
    assert slots.take("j2", "root", [tenant]).held == ()


def test_a_cap_out_of_range_is_refused_naming_it(slots):
    with pytest.raises(ValueError, match="max_running must be from 0"):
        slots.set_cap("tenant:x", -1)
    with pytest.raises(ValueError, match="scope name"):
        slots.set_cap("acme", 2)


def test_a_refused_agent_queues_once_in_order_and_leaves_the_queue_when_it_runs(slots, tenant, clock, ledger):
    slots.take("j1", "root", [tenant])
    slots.take("j2", "root", [tenant])
    for job in ("j3", "j4", "j3"):  # j3 asks again: it keeps its place
        clock.now += 1
        assert not slots.take(job, "root", [tenant]).ok
    assert slots.waiting(tenant) == 2
    (row,) = [r for r in ledger.scope_rows() if r.name == tenant]
    assert (row.running, row.running_limit, row.waiting) == (2, 2, 2)
    assert slots.give_back("j1", "root", [tenant]) == [(tenant, "j3", "root")]
    assert not slots.take("j4", "root", [tenant]).ok  # the slot given back is held for j3, woken
    assert slots.take("j3", "root", [tenant]).ok
    assert slots.waiting(tenant) == 1


def test_a_queue_of_waiters_lives_past_its_last_waiter_for_a_while_only(slots, tenant, redis_client):
    slots.take("j1", "root", [tenant])
    slots.take("j2", "root", [tenant])
    slots.take("j3", "root", [tenant])
    assert 0 < redis_client.ttl(keys.scope_waiting(tenant)) <= keys.WAITING_TTL_SECONDS


def test_a_second_delivery_of_a_running_step_is_told_it_runs_elsewhere(slots, tenant, clock):
    assert slots.take("j1", "root", [tenant], holder="7").ok
    twin = slots.take("j1", "root", [tenant], holder="8")  # a woken copy and its counted-down original
    assert (twin.ok, twin.elsewhere, twin.scope) == (False, True, tenant)
    assert slots.take("j1", "root", [tenant], holder="7").ok  # the holder itself renews
    assert slots.running(tenant) == 1
    clock.now += keys.RUNNING_LEASE_SECONDS + 1  # the holder died: its lease lapsed
    assert slots.take("j1", "root", [tenant], holder="8").ok


def test_a_run_that_names_no_holder_takes_over_the_slot(slots, tenant):
    assert slots.take("j1", "root", [tenant], holder="7").ok
    assert slots.take("j1", "root", [tenant]).ok  # a redelivered first step, of no outbox
    assert slots.running(tenant) == 1
