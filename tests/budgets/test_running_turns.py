"""Admission to a capped scope follows its weighted fair queue, on a real redis-server
with a set clock: tenants waiting together are admitted in proportion to their
weights, each tenant's waiters in order, and no one takes a slot out of turn."""

from __future__ import annotations

import pytest

from covey import keys
from covey.budgets.running import RunningSlots

CAPPED = "global"
A, B = "tenant:a", "tenant:b"


@pytest.fixture
def slots(redis_client, clock):
    slots = RunningSlots(redis_client, clock=clock)
    slots.set_cap(CAPPED, 1)
    assert slots.take("holder", "root", [CAPPED]).ok
    return slots


def scopes_of(job: str) -> list[str]:
    """A job's scopes: the capped one, and its tenant's when its id names one."""
    tenant = job.rsplit("-", 1)[0]
    return [CAPPED, tenant] if tenant.startswith("tenant:") else [CAPPED]


def queue(slots, tenant: str | None, count: int, clock) -> list[str]:
    """``count`` jobs of ``tenant`` refused by the full cap, in that order: their ids."""
    jobs = [f"{tenant or 'none'}-{i}" for i in range(count)]
    for job in jobs:
        clock.now += 0.001
        assert not slots.take(job, "root", scopes_of(job)).ok
    return jobs


def admissions(slots, count: int, running: str = "holder") -> list[str]:
    """The jobs admitted to the one slot, in order, each taking it and giving it back
    in turn, from the job ``running`` on."""
    admitted = []
    for _ in range(count):
        ((_, job, _),) = slots.give_back(running, "root", [CAPPED])
        assert slots.take(job, "root", scopes_of(job)).ok
        admitted.append(job)
        running = job
    return admitted


def test_tenants_waiting_together_are_admitted_in_proportion_to_their_weights_each_in_order(slots, clock):
    slots.set_weight(A, 3)
    b = queue(slots, B, 12, clock)  # b waits first: the order the turns give does not depend on it
    a = queue(slots, A, 12, clock)
    admitted = admissions(slots, 16)
    assert [j for j in admitted if j in a] == a[:12] and [j for j in admitted if j in b] == b[:4]
    for first in (4, 8, 12, 16):  # at every point, within one of 3:1
        got = sum(j in a for j in admitted[:first])
        assert abs(got - first * 3 / 4) <= 1, admitted


def test_equal_weights_alternate_whoever_queued_first(slots, clock):
    a = queue(slots, A, 6, clock)
    queue(slots, B, 6, clock)
    admitted = admissions(slots, 12)
    assert all(abs(sum(j in a for j in admitted[:n]) - n / 2) <= 1 for n in range(1, 13)), admitted


def test_jobs_of_no_tenant_are_one_tenant_of_weight_one(slots, clock):
    slots.set_weight(A, 2)
    none = queue(slots, None, 6, clock)
    a = queue(slots, A, 6, clock)
    admitted = admissions(slots, 6)
    assert sum(j in a for j in admitted) == 4
    assert [j for j in admitted if j in none] == none[:2]


def test_a_tenant_that_was_idle_banks_no_turns(slots, clock):
    a = queue(slots, A, 8, clock)
    assert admissions(slots, 5) == a[:5]  # b had no one waiting meanwhile
    b = queue(slots, B, 4, clock)
    admitted = admissions(slots, 6, running=a[4])
    assert sum(j in b for j in admitted) == 3, admitted  # turn about from now, not all of b's first


def test_a_waiter_asking_again_keeps_its_turn(slots, clock):
    a = queue(slots, A, 2, clock)
    b = queue(slots, B, 1, clock)
    for job in reversed(a):
        assert not slots.take(job, "root", [CAPPED, A]).ok
    assert admissions(slots, 3) == [a[0], b[0], a[1]]


def test_a_slot_given_back_is_held_for_the_waiter_admitted_until_its_wake_lease_lapses(slots, clock):
    (waiter,) = queue(slots, A, 1, clock)
    assert slots.give_back("holder", "root", [CAPPED]) == [(CAPPED, waiter, "root")]
    late = slots.take("late", "root", [CAPPED])
    assert (late.ok, late.running, late.limit, late.reason) == (False, 1, 1, "global running cap 1/1")
    clock.now += keys.WAKE_LEASE_SECONDS + 1  # the woken step never came
    assert slots.give_back("nobody", "root", [CAPPED]) == [(CAPPED, "late", "root")]
    assert slots.take("late", "root", [CAPPED]).ok
    assert not slots.take(waiter, "root", [CAPPED, A]).ok  # it comes at last: it waits again


def test_a_newcomer_finding_a_free_slot_waits_behind_waiters_whose_turn_comes_first(slots, clock):
    first = queue(slots, B, 2, clock)
    slots.set_cap(CAPPED, 2)  # a slot free, and no one woken to take it
    refused = slots.take("new", "root", [CAPPED, B])
    assert (refused.ok, refused.running, refused.ahead, refused.freed) == (False, 1, 2, (CAPPED,))
    assert refused.reason == "global running cap 1/2, 2 waiting ahead of it"
    # Its step ends: it admits the first waiter to the slot it left free.
    assert slots.give_back("new", "root", [], refused.freed) == [(CAPPED, first[0], "root")]

    slots.set_cap(CAPPED, 3)
    slots.set_weight(A, 4)  # a newcomer whose turn comes before every waiter's takes it at once
    assert slots.take("heavy", "root", [CAPPED, A]).ok
    assert slots.waiting(CAPPED) == 2  # first[1] and "new"


def test_a_woken_waiter_refused_by_another_scope_gives_the_slot_held_for_it_up(slots, clock):
    slots.set_cap(A, 1)
    assert slots.take("other", "root", [A]).ok  # tenant a's one slot
    (waiter,) = queue(slots, A, 1, clock)
    (behind,) = queue(slots, B, 1, clock)
    slots.give_back("holder", "root", [CAPPED])  # admits the waiter on global
    refused = slots.take(waiter, "root", [CAPPED, A])
    assert (refused.ok, refused.scope, refused.freed) == (False, A, (CAPPED,))
    assert slots.give_back(waiter, "root", [], refused.freed) == [(CAPPED, behind, "root")]


def test_a_woken_waiter_that_ended_passes_its_slot_on(slots, clock):
    ended, after = queue(slots, A, 2, clock)
    assert slots.give_back("holder", "root", [CAPPED]) == [(CAPPED, ended, "root")]
    assert slots.pass_on(CAPPED, ended, "root") == [(CAPPED, after, "root")]
    assert slots.waiting(CAPPED) == 0


def test_a_weight_is_a_tenants_whole_number_from_1_and_shows_in_its_row(slots, ledger):
    slots.set_weight(A, 3)
    assert {r.name: r.weight for r in ledger.scope_rows()}[A] == 3
    with pytest.raises(ValueError, match="weight must be from 1 to 1000, got 0"):
        slots.set_weight(A, 0)
    with pytest.raises(ValueError, match="give it to a tenant:<name> scope"):
        slots.set_weight(CAPPED, 2)
