"""What an agent keeps for its wrap-up (``reserve``'s ``keep``), on a real redis-server."""

from __future__ import annotations

import uuid

import pytest

from covey.budgets.budget import Budget
from covey.status import CauseKind


@pytest.fixture
def job():
    return f"job-{uuid.uuid4().hex}"


def settle(ledger, job, chain, rid, grant, used):
    assert grant.ok, grant.reason
    assert ledger.settle(job, chain, [], rid, used)


def test_a_call_may_not_use_what_it_keeps(ledger, job):
    ledger.open_root(job, "root", Budget(max_tokens=1000, max_depth=1))
    grant = ledger.reserve(job, ["root"], [], "root:1", 900, 100, keep=300)
    assert grant.ok and grant.tokens == 700  # 1000 less the 300 kept
    settle(ledger, job, ["root"], "root:1", grant, 600)
    refused = ledger.reserve(job, ["root"], [], "root:2", 400, 200, keep=300)  # 400 left: 300 of them kept
    assert not refused.ok and refused.cause.kind is CauseKind.BUDGET and refused.retry_after is None
    assert refused.reason == "token budget exhausted at agent root (400 left, 200 needed and 300 kept for a wrap-up)"
    wrap_up = ledger.reserve(job, ["root"], [], "root:3", 400, 200)  # the wrap-up keeps nothing: it has all 400
    assert wrap_up.ok and wrap_up.tokens == 400


def test_what_a_parent_keeps_is_out_of_its_childrens_reach(ledger, job):
    ledger.open_root(job, "root", Budget(max_tokens=1000, max_depth=1))
    settle(ledger, job, ["root"], "root:1", ledger.reserve(job, ["root"], [], "root:1", 100, 50, keep=400), 100)
    ledger.open(job, ["root"], "c1", Budget(max_tokens=900, max_depth=0))
    child = ledger.reserve(job, ["root", "c1"], [], "c1:1", 900, 100)
    assert child.ok and child.tokens == 500  # 900 left at the root, 400 of them its own
    settle(ledger, job, ["root", "c1"], "c1:1", child, 500)
    refused = ledger.reserve(job, ["root", "c1"], [], "c1:2", 300, 50)
    assert not refused.ok and refused.retry_after is None  # not held up: nothing in flight would free it
    assert refused.reason.startswith("token budget exhausted at agent root (400 left, 50 needed and 400 kept")
    assert ledger.reserve(job, ["root"], [], "root:2", 400, 300).ok  # the root's wrap-up has its room


def test_a_call_short_only_of_calls_in_flight_waits_unless_what_is_kept_leaves_no_room(ledger, job):
    ledger.open_root(job, "root", Budget(max_tokens=1000, max_depth=1))
    assert ledger.reserve(job, ["root"], [], "root:1", 500, 500).ok  # in flight
    held_up = ledger.reserve(job, ["root"], [], "root:2", 500, 500, keep=100)
    assert not held_up.ok and held_up.retry_after is not None  # 900 once root:1 settles
    refused = ledger.reserve(job, ["root"], [], "root:2", 500, 500, keep=600)
    assert not refused.ok and refused.retry_after is None  # 400 at most, ever
