"""An agent over its scope's running cap gives its slot back instead of running, on a
real Redis and the sim model, without Celery: the loop answers a hop, and the
task's countdown is the test's to wait out."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentTerms
from covey.config.settings import Settings
from covey.context import RunContext
from covey.spec import AgentSpec
from covey.status import AgentStatus
from covey.worker import loop, slots
from covey.worker.deps import Deps


@pytest.fixture
def deps(redis_server):
    return Deps.from_settings(Settings(redis_url=redis_server.url, model_retries=0))


@pytest.fixture
def tenant(deps):
    name = f"tenant:{uuid.uuid4().hex[:8]}"
    deps.ledger.set_scope(name, None, None)
    deps.slots.set_cap(name, 1)
    return name


def begin(deps, tenant, budget: Budget | None = None):
    ctx = RunContext(
        job_id=f"slots-{uuid.uuid4().hex}", agent_id="root", budget=budget or Budget(), scopes=["global", tenant]
    )
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(scopes=ctx.scopes))
    return loop.begin(deps, ctx, AgentSpec(task="What is 2 * 21?", tools=[]))


def test_an_agent_over_the_cap_waits_saying_so_and_runs_once_the_slot_is_given_back(deps, tenant):
    holder, _ = begin(deps, tenant)
    assert slots.take(deps, holder) is None  # the one slot, held by a step in flight
    state, action = begin(deps, tenant)
    out = loop.advance(deps, state, action)
    assert isinstance(out, loop.Paused) and out.hop is not None
    assert out.hop.wait.reason == f"{tenant} running cap 1/1"
    assert 0 < out.hop.seconds <= slots.LONGEST_CAP_HOP_SECONDS
    assert out.state.cycle == 0 and deps.slots.running(tenant) == 1  # it called nothing and holds nothing
    assert out.state.node(AgentStatus.WAITING).wait == out.hop.wait

    slots.give_back(deps, holder.ctx.job_id, "root")
    done = loop.advance(deps, out.state, out.action)
    assert isinstance(done, loop.Finished) and done.result.output == "42"
    assert deps.tree.node(state.ctx.job_id, "root").wait is None
    slots.give_back(deps, state.ctx.job_id, "root")
    assert deps.slots.running(tenant) == 0


def test_a_capped_agent_asks_again_sooner_than_a_hop_and_later_each_time(deps, tenant):
    holder, _ = begin(deps, tenant)
    slots.take(deps, holder)
    state, action = begin(deps, tenant)
    hops = []
    for _ in range(6):
        out = loop.advance(deps, state, action)
        hops.append(out.hop.seconds)
        state, action = out.state, out.action
    assert hops[0] <= slots.FIRST_CAP_HOP_SECONDS
    assert hops[-1] > slots.FIRST_CAP_HOP_SECONDS * 4
    assert max(hops) <= slots.LONGEST_CAP_HOP_SECONDS


def test_a_cancelled_or_late_agent_ends_instead_of_waiting_again(deps, tenant):
    holder, _ = begin(deps, tenant)
    slots.take(deps, holder)
    cancelled, action = begin(deps, tenant)
    deps.ledger.cancel(cancelled.ctx.job_id)
    assert loop.advance(deps, cancelled, action).result.status is AgentStatus.CANCELLED
    late, action = begin(deps, tenant, budget=Budget(deadline=deps.now() - timedelta(seconds=1)))
    assert loop.advance(deps, late, action).result.status is AgentStatus.TIMED_OUT


def test_a_hop_ends_before_the_broker_would_hand_its_message_to_another_worker():
    default = Settings()
    assert slots.longest_hop(default) == slots.MAX_HOP_SECONDS
    tight = Settings(slice_seconds=1, model_timeout=2, model_retries=0, visibility_timeout=6)
    assert slots.longest_hop(tight) == 1.5  # (6 - 1 - 2) / 2: the countdown and the step after it fit in 6 s
