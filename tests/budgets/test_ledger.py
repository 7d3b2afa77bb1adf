"""RedisLedger against a real redis-server: clamping, refusals, idempotence, expiry."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest

from covey import keys
from covey.budgets.budget import Budget
from covey.budgets.cancels import Cancels
from covey.budgets.ledger import AgentTerms, FirstRun, Ledger, LedgerError
from covey.errors import StateLost
from covey.status import Cause, CauseKind, Resource


@pytest.fixture
def job():
    return f"job-{uuid.uuid4().hex}"


def scope_name(kind: str = "sweep") -> str:
    return f"{kind}:{uuid.uuid4().hex[:8]}"


def spend(ledger, job, chain, scopes, rid, tokens):
    grant = ledger.reserve(job, chain, scopes, rid, tokens, 1)
    assert grant.ok, grant.reason
    assert ledger.settle(job, chain, scopes, rid, grant.tokens)
    return grant.tokens


def test_implements_the_protocol(ledger):
    assert isinstance(ledger, Ledger)


# -- open -----------------------------------------------------------------------


def test_open_clamps_to_what_the_parent_has_left(ledger, job):
    deadline = datetime(2030, 1, 1, tzinfo=UTC)
    root = Budget(max_tokens=1000, max_cycles=10, max_agents=4, max_depth=2, deadline=deadline)
    ledger.open_root(job, "root", root)
    spend(ledger, job, ["root"], [], "root:0", 300)
    assert ledger.reserve(job, ["root"], [], "root:1", 100, 100).ok  # in flight: counts against the child too

    asked = Budget(max_tokens=5000, max_agents=10, max_depth=5, deadline=deadline)
    opened = ledger.open(job, ["root"], "c1", asked)
    assert opened.ok and opened.reason is None
    assert opened.budget == Budget(max_tokens=600, max_cycles=8, max_agents=3, max_depth=1, deadline=deadline)

    grand = ledger.open(job, ["root", "c1"], "g1", Budget(max_tokens=200, max_cycles=20, max_depth=1))
    assert grand.budget == Budget(max_tokens=200, max_cycles=8, max_agents=2, max_depth=0)


def test_open_unlimited_stays_unlimited(ledger, job):
    ledger.open_root(job, "root", Budget(max_depth=1))
    opened = ledger.open(job, ["root"], "c1", Budget(max_tokens=50, max_depth=3))
    assert opened.budget == Budget(max_tokens=50, max_depth=0)


def test_open_may_clamp_to_zero_and_the_child_is_refused_at_its_first_reserve(ledger, job):
    ledger.open_root(job, "root", Budget(max_tokens=100, max_depth=1))
    spend(ledger, job, ["root"], [], "root:0", 100)
    opened = ledger.open(job, ["root"], "c1", Budget(max_tokens=50, max_depth=0))
    assert opened.ok and opened.budget.max_tokens == 0
    grant = ledger.reserve(job, ["root", "c1"], [], "c1:0", 10, 1)
    assert not grant.ok and grant.reason == "token budget exhausted at agent c1 (0 left, 1 needed)"


def test_open_refuses_past_max_agents_naming_the_ancestor(ledger, job):
    ledger.open_root(job, "root", Budget(max_agents=3, max_depth=3))
    assert ledger.open(job, ["root"], "c1", Budget(max_agents=10, max_depth=2)).budget.max_agents == 2
    assert ledger.open(job, ["root"], "c2", Budget(max_depth=2)).budget.max_agents == 1
    assert ledger.open(job, ["root", "c1"], "g1", Budget(max_depth=1)).ok

    refused = ledger.open(job, ["root", "c1"], "g2", Budget(max_depth=1))  # c1 has room, root does not
    assert not refused.ok and refused.budget is None
    assert refused.reason == "spawn refused: agent cap reached (max_agents=3 at agent root)"
    assert refused.cause == Cause(kind=CauseKind.BUDGET, agent_id="root", resource=Resource.AGENTS)
    refused = ledger.open(job, ["root"], "c3", Budget(max_depth=1))
    assert refused.reason == "spawn refused: agent cap reached (max_agents=3 at agent root)"
    assert ledger.snapshot(job).agents_spawned == 3  # refusals charge nothing


def test_open_many_opens_in_order_each_clamped_to_what_those_before_it_left(ledger, job):
    ledger.open_root(job, "root", Budget(max_agents=3, max_depth=2))
    terms = AgentTerms(tools=["calc"])
    asked = [(f"c{i}", Budget(max_agents=10, max_depth=1), terms) for i in range(1, 5)]
    opened = ledger.open_many(job, ["root"], asked)
    assert [o.budget.max_agents if o.ok else o.reason for o in opened] == [
        2,
        1,
        0,
        "spawn refused: agent cap reached (max_agents=3 at agent root)",
    ]
    assert ledger.agent(job, "c1").tools == ["calc"]
    assert ledger.snapshot(job).agents_spawned == 3
    assert ledger.open_many(job, ["root"], asked[:3]) == opened[:3]  # opened again: the same, charged once
    assert ledger.snapshot(job).agents_spawned == 3


def test_open_refuses_past_max_agents_naming_the_nearest_capped_ancestor(ledger, job):
    ledger.open_root(job, "root", Budget(max_agents=10, max_depth=3))
    ledger.open(job, ["root"], "c1", Budget(max_agents=1, max_depth=2))
    assert ledger.open(job, ["root", "c1"], "g1", Budget(max_depth=1)).ok
    refused = ledger.open(job, ["root", "c1"], "g2", Budget(max_depth=1))
    assert refused.reason == "spawn refused: agent cap reached (max_agents=1 at agent c1)"


def test_open_refuses_past_depth(ledger, job):
    ledger.open_root(job, "root", Budget(max_depth=1))
    child = ledger.open(job, ["root"], "c1", Budget(max_depth=5))
    assert child.budget.max_depth == 0
    refused = ledger.open(job, ["root", "c1"], "g1", Budget(max_depth=0))
    assert not refused.ok
    assert refused.reason == "spawn refused: depth cap reached (max_depth=0 at agent c1)"
    assert refused.cause == Cause(kind=CauseKind.BUDGET, agent_id="c1", resource=Resource.DEPTH)

    flat = f"job-{uuid.uuid4().hex}"
    ledger.open_root(flat, "root", Budget(max_depth=0))
    assert ledger.open(flat, ["root"], "c1", Budget(max_depth=0)).reason == (
        "spawn refused: depth cap reached (max_depth=0 at agent root)"
    )
    assert ledger.snapshot(flat).agents_spawned == 0


def test_open_is_idempotent_by_child_id(ledger, job):
    ledger.open_root(job, "root", Budget(max_tokens=1000, max_agents=5, max_depth=2))
    first = ledger.open(job, ["root"], "c1", Budget(max_tokens=400, max_depth=1))
    again = ledger.open(job, ["root"], "c1", Budget(max_tokens=900, max_depth=1))
    assert again == first
    assert ledger.snapshot(job).agents_spawned == 1


def test_open_root_is_idempotent(ledger, job):
    ledger.open_root(job, "root", Budget(max_tokens=1000, max_depth=2))
    spend(ledger, job, ["root"], [], "root:0", 10)
    ledger.open_root(job, "root", Budget(max_tokens=5, max_depth=0))
    snap = ledger.snapshot(job)
    assert (snap.tokens_limit, snap.tokens_used, snap.agents[0].depth_limit) == (1000, 10, 2)


# -- reserve ----------------------------------------------------------------------


def test_reserve_clamps_the_grant_to_what_is_left(ledger, job):
    ledger.open_root(job, "root", Budget(max_tokens=100, max_depth=0))
    grant = ledger.reserve(job, ["root"], [], "root:0", 500, 10)
    assert (grant.ok, grant.tokens, grant.reason, grant.cancelled) == (True, 100, None, False)
    assert ledger.settle(job, ["root"], [], "root:0", 95)
    refused = ledger.reserve(job, ["root"], [], "root:1", 500, 10)
    assert (refused.ok, refused.tokens, refused.retry_after) == (False, 0, None)  # for good: used leaves 5
    assert refused.reason == "token budget exhausted at agent root (5 left, 10 needed)"


@pytest.mark.parametrize("short", ["agent", "scope"])
def test_a_call_short_only_of_what_calls_in_flight_hold_waits_for_them(ledger, job, short):
    """Refused only when what is used leaves no room: short of what another call in
    flight holds, a call is held up (asked again later), and granted once it settles."""
    tenant = scope_name("tenant")
    ledger.open_root(job, "root", Budget(max_tokens=100 if short == "agent" else 1000, max_depth=0))
    ledger.set_scope(tenant, 100 if short == "scope" else None, None)
    first = ledger.reserve(job, ["root"], [tenant], "root:0", 90, 10)
    assert first.ok and first.tokens == 90
    held = ledger.reserve(job, ["root"], [tenant], "root:1", 90, 20)
    named = "agent root" if short == "agent" else f"scope {tenant}"
    assert (held.ok, held.tokens) == (False, 0) and 0 < held.retry_after <= 2
    assert held.reason == f"token budget at {named} held by calls in flight (10 left until they settle, 20 needed)"
    assert held.cause.kind is CauseKind.BUDGET and held.cause.resource is Resource.TOKENS
    assert ledger.settle(job, ["root"], [tenant], "root:0", 30)
    again = ledger.reserve(job, ["root"], [tenant], "root:1", 90, 20)
    assert again.ok and again.tokens == 70


@pytest.mark.parametrize("short", ["agent", "ancestor", "global", "tenant"])
def test_reserve_refuses_below_min_tokens_naming_the_short_row(ledger, job, short):
    glob, tenant = scope_name(), scope_name("tenant")
    ledger.open_root(job, "root", Budget(max_tokens=1000, max_depth=1))
    ledger.open(job, ["root"], "c1", Budget(max_tokens=600, max_depth=0))
    ledger.open(job, ["root"], "c2", Budget(max_tokens=400 if short == "agent" else 700, max_depth=0))
    spend(ledger, job, ["root", "c1"], [], "c1:0", 500)  # root now has 500 left
    ledger.set_scope(glob, 450 if short in ("global", "tenant") else None, None)
    ledger.set_scope(tenant, 420 if short == "tenant" else None, None)
    expected = {
        "agent": ("agent c2", 400),
        "ancestor": ("agent root", 500),
        "global": (f"scope {glob}", 450),
        "tenant": (f"scope {tenant}", 420),
    }[short]
    row = {
        "agent": {"agent_id": "c2"},
        "ancestor": {"agent_id": "root"},
        "global": {"scope": glob},
        "tenant": {"scope": tenant},
    }[short]

    chain, scopes = ["root", "c2"], [glob, tenant]
    refused = ledger.reserve(job, chain, scopes, "c2:0", 800, 600)
    assert not refused.ok and not refused.cancelled
    assert refused.reason == f"token budget exhausted at {expected[0]} ({expected[1]} left, 600 needed)"
    assert refused.cause == Cause(kind=CauseKind.BUDGET, resource=Resource.TOKENS, **row)
    grant = ledger.reserve(job, chain, scopes, "c2:0", 800, 100)
    assert grant.ok and grant.tokens == expected[1]


def test_reserve_refuses_when_cycles_run_out(ledger, job):
    glob = scope_name()
    ledger.open_root(job, "root", Budget(max_cycles=3, max_depth=0))
    ledger.set_scope(glob, None, 2)
    assert ledger.reserve(job, ["root"], [glob], "r:0", 10, 1).ok  # reserved cycles count
    spend(ledger, job, ["root"], [glob], "r:1", 10)
    refused = ledger.reserve(job, ["root"], [glob], "r:2", 10, 1)
    assert refused.reason == f"cycle budget exhausted at scope {glob} (max_cycles=2)"
    assert refused.cause == Cause(kind=CauseKind.BUDGET, scope=glob, resource=Resource.CYCLES)
    ledger.set_scope(glob, None, None)
    assert ledger.reserve(job, ["root"], [glob], "r:2", 10, 1).ok
    assert ledger.reserve(job, ["root"], [glob], "r:3", 10, 1).reason == (
        "cycle budget exhausted at agent root (max_cycles=3)"
    )


def test_usage_stays_at_or_under_every_cap(ledger, job):
    glob = scope_name()
    ledger.set_scope(glob, 2_000, None)
    ledger.open_root(job, "root", Budget(max_tokens=1_500, max_cycles=40, max_depth=1))
    ledger.open(job, ["root"], "c1", Budget(max_tokens=900, max_depth=0))
    ledger.open(job, ["root"], "c2", Budget(max_tokens=900, max_depth=0))
    for i in range(50):
        for child in ("c1", "c2"):
            grant = ledger.reserve(job, ["root", child], [glob], f"{child}:{i}", 70, 1)
            if grant.ok:
                ledger.settle(job, ["root", child], [glob], f"{child}:{i}", grant.tokens)
    snap = ledger.snapshot(job)
    assert snap.tokens_used == 1_500 and snap.tokens_reserved == 0
    for row in snap.agents:
        assert row.tokens_used <= row.tokens_limit and row.cycles_used <= 40
    assert snap.scopes[0].tokens_used == 1_500 <= snap.scopes[0].tokens_limit


def test_reserve_and_settle_are_idempotent_by_reservation_id(ledger, job):
    glob = scope_name()
    ledger.set_scope(glob, 10_000, None)
    ledger.open_root(job, "root", Budget(max_tokens=1000, max_depth=0))
    first = ledger.reserve(job, ["root"], [glob], "root:0", 300, 1)
    assert ledger.reserve(job, ["root"], [glob], "root:0", 300, 1) == first  # live: same grant
    assert ledger.snapshot(job).tokens_reserved == 300
    assert ledger.settle(job, ["root"], [glob], "root:0", 250) is True
    assert ledger.settle(job, ["root"], [glob], "root:0", 250) is False
    assert ledger.reserve(job, ["root"], [glob], "root:0", 300, 1) == first  # settled: same grant, no charge
    snap = ledger.snapshot(job)
    assert (snap.tokens_used, snap.tokens_reserved, snap.cycles_used) == (250, 0, 1)
    assert (snap.scopes[0].tokens_used, snap.scopes[0].cycles_used) == (250, 1)


def test_a_cancelled_job_refuses_reserve(ledger, redis_client, job):
    ledger.open_root(job, "root", Budget(max_depth=0))
    Cancels(redis_client, keys.DEFAULT_JOB_TTL_SECONDS).cancel_job(job)
    grant = ledger.reserve(job, ["root"], [], "root:0", 10, 1)
    assert grant == type(grant)(ok=False, tokens=0, reason="job cancelled", cause=Cause(kind=CauseKind.CANCELLED))
    assert grant.cancelled and grant.retry_after is None
    assert ledger.snapshot(job).cancelled


def test_an_agent_its_parent_cancelled_is_refused_reserve_and_so_is_every_agent_under_it(ledger, redis_client, job):
    ledger.open_root(job, "root", Budget(max_depth=2))
    ledger.open(job, ["root"], "c1", Budget(max_depth=1))
    ledger.open(job, ["root", "c1"], "g1", Budget(max_depth=0))
    assert ledger.reserve(job, ["root", "c1", "g1"], [], "g1:1", 10, 1).ok
    Cancels(redis_client, keys.DEFAULT_JOB_TTL_SECONDS).cancel_agents(job, ["c1"])
    cancelled = Cause(kind=CauseKind.CANCELLED)
    own = ledger.reserve(job, ["root", "c1"], [], "c1:1", 10, 1)
    assert (own.ok, own.reason, own.cause) == (False, "it was cancelled by its parent", cancelled)
    under = ledger.reserve(job, ["root", "c1", "g1"], [], "g1:1", 10, 1)  # refused before a replay too
    assert (under.ok, under.reason, under.cause) == (False, "agent c1 was cancelled by its parent", cancelled)
    assert ledger.reserve(job, ["root"], [], "root:1", 10, 1).ok


# -- stale reservations -------------------------------------------------------------


def test_stale_reservation_is_released_and_a_late_settle_charges_once(ledger, job, redis_client):
    glob = scope_name()
    ledger.set_scope(glob, 10_000, None)
    ledger.open_root(job, "root", Budget(max_tokens=1000, max_cycles=5, max_depth=0))
    assert ledger.reserve(job, ["root"], [glob], "root:0", 400, 1).tokens == 400
    assert ledger.release_stale() == 0  # not expired yet
    assert ledger.release_stale(now=1e12) == 1
    assert ledger.release_stale(now=1e12) == 0
    snap = ledger.snapshot(job)
    assert (snap.tokens_reserved, snap.cycles_used, snap.scopes[0].tokens_reserved) == (0, 0, 0)

    assert ledger.settle(job, ["root"], [glob], "root:0", 380) is True
    assert ledger.settle(job, ["root"], [glob], "root:0", 380) is False
    snap = ledger.snapshot(job)
    assert (snap.tokens_used, snap.tokens_reserved, snap.cycles_used) == (380, 0, 1)
    assert (snap.scopes[0].tokens_used, snap.scopes[0].tokens_reserved) == (380, 0)
    assert redis_client.hget(keys.calls(job), "root:0") == "380"  # settled: no hold left
    assert redis_client.zscore(keys.live_reservations(), json.dumps([job, "root:0"], separators=(",", ":"))) is None


def test_reserve_frees_a_dead_workers_reservation_first(ledger, job, clock):
    ledger.open_root(job, "root", Budget(max_tokens=100, max_depth=0))
    assert ledger.reserve(job, ["root"], [], "root:0", 100, 1).ok  # its worker dies
    assert not ledger.reserve(job, ["root"], [], "root:1", 100, 1).ok
    clock.now += keys.RESERVATION_TTL_SECONDS + 1
    assert ledger.reserve(job, ["root"], [], "root:1", 100, 1).tokens == 100


# -- reading ----------------------------------------------------------------------


def test_snapshot_numbers(ledger, job):
    glob, tenant = scope_name(), scope_name("tenant")
    ledger.set_scope(tenant, 10_000, 50)
    ledger.open_root(job, "root", Budget(max_tokens=5000, max_cycles=20, max_agents=4, max_depth=2))
    ledger.open(job, ["root"], "c1", Budget(max_tokens=1000, max_cycles=5, max_agents=1, max_depth=1))
    spend(ledger, job, ["root"], [glob, tenant], "root:0", 100)
    spend(ledger, job, ["root", "c1"], [glob, tenant], "c1:0", 200)
    ledger.reserve(job, ["root", "c1"], [glob, tenant], "c1:1", 50, 1)

    snap = ledger.snapshot(job)
    assert snap.root_id == "root"
    assert (snap.tokens_used, snap.tokens_reserved, snap.tokens_limit) == (300, 50, 5000)
    # c1:1 is in flight: its cycle counts, its tokens are reserved, not used
    assert (snap.cycles_used, snap.cycles_limit, snap.agents_spawned, snap.agents_limit) == (3, 20, 1, 4)
    assert not snap.cancelled
    root, c1 = snap.agents
    assert (root.agent_id, root.depth, c1.agent_id, c1.depth) == ("root", 0, "c1", 1)
    assert (c1.tokens_used, c1.tokens_reserved, c1.tokens_limit) == (200, 50, 1000)
    assert (c1.cycles_used, c1.agents_limit, c1.depth_limit) == (2, 1, 1)
    scopes = [(s.name, s.tokens_used, s.tokens_limit, s.cycles_used, s.cycles_limit) for s in snap.scopes]
    assert scopes == [(tenant, 300, 10_000, 3, 50)]  # the uncapped scope was not charged
    dumped = snap.model_dump(mode="json")
    assert dumped["agents"][1]["tokens_used"] == 200 and dumped["job_id"] == job


def test_a_scope_without_a_cap_is_not_charged_nor_written(ledger, job, redis_client):
    uncapped, capped = scope_name(), scope_name()
    ledger.set_scope(capped, 10_000, None)
    ledger.open_root(job, "root", Budget(max_depth=0), AgentTerms(scopes=[uncapped, capped]))
    spend(ledger, job, ["root"], [uncapped, capped], "root:0", 100)
    assert not redis_client.exists(keys.scope(uncapped))
    assert {s.name: s.tokens_used for s in ledger.snapshot(job).scopes} == {uncapped: 0, capped: 100}


def test_snapshot_of_an_unknown_job_is_empty(ledger, job):
    snap = ledger.snapshot(job)
    assert (snap.root_id, snap.agents, snap.scopes, snap.tokens_used) == (None, [], [], 0)


def test_scopes_hold_across_jobs_and_never_expire(ledger, redis_client):
    name = scope_name("sweep")
    ledger.set_scope(name, 500, 3)
    for job in (f"job-{uuid.uuid4().hex}", f"job-{uuid.uuid4().hex}"):
        ledger.open_root(job, "root", Budget(max_depth=0))
        spend(ledger, job, ["root"], [name], "root:0", 200)
        assert redis_client.ttl(keys.agent(job, "root")) > 0
    row = next(r for r in ledger.scope_rows() if r.name == name)
    assert (row.tokens_used, row.tokens_limit, row.cycles_used, row.cycles_limit) == (400, 500, 2, 3)
    assert redis_client.ttl(keys.scope(name)) == -1
    ledger.set_scope(name, None, 3)
    assert next(r for r in ledger.scope_rows() if r.name == name).tokens_limit is None


# -- bad input --------------------------------------------------------------------


def test_bad_calls_raise_clear_errors(ledger, job):
    ledger.open_root(job, "root", Budget(max_depth=1))
    with pytest.raises(ValueError, match="use open_root"):
        ledger.open(job, [], "c1", Budget())
    with pytest.raises(ValueError, match="own ancestor"):
        ledger.open(job, ["root"], "root", Budget())
    with pytest.raises(StateLost, match="the ledger row of agent ghost is missing"):
        ledger.open(job, ["root", "ghost"], "c1", Budget())
    with pytest.raises(StateLost, match="the ledger row of agent ghost is missing"):
        ledger.reserve(job, ["root", "ghost"], [], "ghost:0", 10, 1)
    with pytest.raises(ValueError, match="min_tokens"):
        ledger.reserve(job, ["root"], [], "root:0", 10, 11)
    with pytest.raises(ValueError, match="tokens >= 1"):
        ledger.reserve(job, ["root"], [], "root:0", 0, 0)
    with pytest.raises(ValueError, match="chain"):
        ledger.reserve(job, [], [], "root:0", 10, 1)
    with pytest.raises(ValueError, match="negative"):
        ledger.settle(job, ["root"], [], "root:0", -1)
    with pytest.raises(ValueError, match="max_tokens cannot be negative"):
        ledger.set_scope(scope_name(), -1, None)
    capped = scope_name()
    ledger.set_scope(capped, 10_000, None)
    assert ledger.reserve(job, ["root"], [capped], "root:0", 10, 1).ok
    with pytest.raises(LedgerError, match="another chain or scopes"):
        ledger.settle(job, ["root"], [], "root:0", 10)
    assert ledger.snapshot(job).tokens_used == 0


def test_a_dead_workers_hold_on_a_scope_is_released_by_another_jobs_reserve(ledger, clock, redis_client):
    tenant = scope_name("tenant")
    ledger.set_scope(tenant, max_tokens=1000, max_cycles=None)
    dead, alive = f"job-{uuid.uuid4().hex}", f"job-{uuid.uuid4().hex}"
    for job_id in (dead, alive):
        ledger.open_root(job_id, "root", Budget(max_depth=0))
    assert ledger.reserve(dead, ["root"], [tenant], "root:1", 800, 1).tokens == 800
    assert ledger.reserve(alive, ["root"], [tenant], "root:1", 900, 1).tokens == 200
    ledger.settle(alive, ["root"], [tenant], "root:1", 200)
    clock.now += keys.RESERVATION_TTL_SECONDS + 1  # the dead job's worker never settles
    grant = ledger.reserve(alive, ["root"], [tenant], "root:2", 900, 1)
    assert grant.tokens == 800
    (row,) = [r for r in ledger.scope_rows() if r.name == tenant]
    assert (row.tokens_used, row.tokens_reserved) == (200, 800)
    assert redis_client.zcard(keys.live_reservations()) == 1


@pytest.mark.parametrize("name", ["tenant:no spaces", "global:x", "acme", "tenant:"])
def test_scope_names_are_checked(ledger, name):
    with pytest.raises(ValueError, match="scope name"):
        ledger.set_scope(name, 10, None)


# -- terms, own cycle caps and replay ---------------------------------------------


def test_an_agents_terms_are_kept_on_its_row(ledger, job):
    ledger.open_root(job, "root", Budget(max_depth=1), AgentTerms(tools=["calculator", "spawn_agents"], max_cycles=7))
    ledger.open(job, ["root"], "c1", Budget(max_depth=0), AgentTerms(tools=[], deny=["write_file"], max_cycles=3))
    root, child = ledger.agent(job, "root"), ledger.agent(job, "c1")
    assert (root.tools, root.deny, root.agent_cycles_limit) == (["calculator", "spawn_agents"], [], 7)
    assert (child.tools, child.deny, child.agent_cycles_limit) == ([], ["write_file"], 3)
    assert ledger.agent(job, "never-opened") is None
    ledger.open_root(job, "open-handed", Budget())
    assert ledger.agent(job, "open-handed").tools is None  # no list: every tool


def test_an_agents_priority_is_kept_on_its_row_and_its_ancestors_named_after_it(ledger, job):
    ledger.open_root(job, "root", Budget(max_depth=2), AgentTerms(priority=9))
    ledger.open(job, ["root"], "c1", Budget(max_depth=1), AgentTerms(priority=9))
    ledger.open(job, ["root", "c1"], "c2", Budget(max_depth=0), AgentTerms(priority=0))
    rows = [ledger.agent(job, agent) for agent in ("root", "c1", "c2")]
    assert [(row.priority, row.ancestors) for row in rows] == [(9, []), (9, ["root"]), (0, ["root", "c1"])]
    ledger.open_root(job, "older", Budget())
    assert ledger.agent(job, "older").priority is None  # a row opened with none: the worker's default


def test_reserve_refuses_a_call_past_the_agents_own_cycle_cap(ledger, job):
    ledger.open_root(job, "root", Budget(max_cycles=100), AgentTerms(max_cycles=2))
    for cycle in (1, 2):
        spend_cycle = ledger.reserve(job, ["root"], [], f"root:{cycle}", 10, 1, cycle=cycle)
        assert spend_cycle.ok
        ledger.settle(job, ["root"], [], f"root:{cycle}", 10)
    refused = ledger.reserve(job, ["root"], [], "root:3", 10, 1, cycle=3)
    assert not refused.ok
    assert refused.reason == "cycle cap reached: max_cycles=2 for this agent"
    assert refused.cause == Cause(kind=CauseKind.BUDGET, agent_id="root", resource=Resource.CYCLES)
    assert ledger.reserve(job, ["root"], [], "root:2", 10, 1, cycle=2).ok  # a replay of a call within it


def test_a_settled_reservation_is_granted_again_with_its_record(ledger, job, redis_client):
    ledger.open_root(job, "root", Budget(max_tokens=1000))
    first = ledger.reserve(job, ["root"], [], "root:1", 300, 10, cycle=1)
    assert first.record is None
    assert ledger.settle(job, ["root"], [], "root:1", 120, record='{"reply": "kept"}')
    again = ledger.reserve(job, ["root"], [], "root:1", 300, 10, cycle=1)
    assert (again.ok, again.tokens, again.record) == (True, first.tokens, '{"reply": "kept"}')
    assert ledger.snapshot(job).tokens_used == 120  # charged once
    redis_client.delete(keys.replies(job, "root"))  # the agent ended: its final record retires them
    assert ledger.reserve(job, ["root"], [], "root:1", 300, 10, cycle=1).record is None


def test_a_roots_first_step_is_held_by_one_delivery_until_its_hold_ends(ledger, job, clock):
    # Two deliveries of one run_job (a client resubmitting under the job's id): the
    # second must not run the root's first step beside the first, nor be kept out
    # of it once the first's hold has passed (its worker died with it).
    terms = AgentTerms(scopes=["global"], digest="a")
    first = ledger.open_root(job, "root", Budget(), terms, FirstRun("tag-1", 60))
    assert first is not None and first.first_run == "tag-1"
    assert first.first_run_until == pytest.approx(clock() + 60)
    second = ledger.open_root(job, "root", Budget(), terms, FirstRun("tag-2", 60))
    assert second == first  # read, not written
    again = ledger.open_root(job, "root", Budget(), terms, FirstRun("tag-1", 60))
    assert again is not None and again.first_run == "tag-1"  # the same delivery handed back goes on
    clock.now += 61
    late = ledger.open_root(job, "root", Budget(), terms, FirstRun("tag-2", 60))
    assert late is not None and late.first_run == "tag-2"
    assert ledger.open_root(job, "root", Budget(), terms).first_run == "tag-2"  # one that holds nothing takes nothing


def test_opening_a_root_again_under_another_digest_changes_nothing_of_its_row(ledger, job):
    # A run_job reusing a running job's id with another spec: the worker refuses it on
    # the digest the row keeps, and the row must not have taken the newcomer's terms first.
    ledger.set_scope(theirs := scope_name(), None, None)
    first = ledger.open_root(job, "root", Budget(max_tool_calls=5), AgentTerms(scopes=["global"], digest="a"))
    again = ledger.open_root(job, "root", Budget(max_tool_calls=500), AgentTerms(scopes=["global", theirs], digest="b"))
    assert again == first and again.digest == "a"
    snapshot = ledger.snapshot(job)
    assert snapshot.tool_calls_limit == 5 and [s.name for s in snapshot.scopes] == ["global"]
