"""Budget.child: what a child asks for before the ledger clamps it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from covey.budgets.budget import Budget

DEADLINE = datetime(2030, 1, 1, tzinfo=UTC)


def test_child_scales_tokens_and_cycles_halves_spawns_and_drops_a_level():
    parent = Budget(max_tokens=10_000, max_cycles=9, max_agents=7, max_depth=3, deadline=DEADLINE)
    expected = Budget(max_tokens=5_000, max_cycles=4, max_agents=3, max_depth=2, deadline=DEADLINE)
    assert parent.child() == expected


def test_child_fraction_floors_but_never_below_one():
    parent = Budget(max_tokens=10, max_cycles=3, max_depth=1)
    child = parent.child(0.25)
    assert (child.max_tokens, child.max_cycles) == (2, 1)
    assert parent.child(0.01).max_tokens == 1


def test_child_asks_for_its_share_of_the_money():
    assert Budget(max_cost=0.5, max_depth=1).child(0.25).max_cost == 0.125


@pytest.mark.parametrize("cost", [-0.01, float("nan"), "1", 10**10])
def test_a_cost_cap_is_a_finite_number_of_dollars_the_ledger_can_hold(cost):
    with pytest.raises(ValidationError, match="max_cost"):
        Budget(max_cost=cost)


def test_child_keeps_unlimited_unlimited():
    child = Budget(max_depth=2).child()
    assert (child.max_tokens, child.max_cycles, child.max_agents, child.deadline) == (None, None, None, None)
    assert child.max_cost is None
    assert child.max_depth == 1


@pytest.mark.parametrize(("spawns", "half"), [(0, 1), (1, 1), (2, 1), (3, 1), (4, 2), (9, 4)])
def test_child_halves_spawns_at_least_one(spawns, half):
    assert Budget(max_agents=spawns).child().max_agents == half


def test_full_fraction_keeps_tokens_and_cycles():
    child = Budget(max_tokens=100, max_cycles=5, max_depth=1).child(1.0)
    assert (child.max_tokens, child.max_cycles, child.max_depth) == (100, 5, 0)


def test_child_refused_at_depth_zero():
    with pytest.raises(ValueError, match="max_depth is 0"):
        Budget(max_depth=0).child()


@pytest.mark.parametrize("fraction", [0, -0.5, 1.01, 2])
def test_fraction_out_of_bounds_is_refused(fraction):
    with pytest.raises(ValueError, match="fraction must be in"):
        Budget(max_tokens=100).child(fraction)


def test_deadline_must_be_aware_and_is_kept_in_utc():
    with pytest.raises(ValidationError, match="timezone"):
        Budget(deadline=datetime(2030, 1, 1))
    local = datetime(2030, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))
    assert Budget(deadline=local).child().deadline == DEADLINE
