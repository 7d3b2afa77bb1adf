"""An agent over its scope's running cap gives its slot back instead of running, on a
real Redis and the sim model, without Celery: the loop answers a hop, and the
task's countdown is the test's to wait out."""

from __future__ import annotations

import copy
import dataclasses
import uuid
from datetime import timedelta

import pytest

from covey import wire
from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentTerms
from covey.config.settings import Settings
from covey.context import RunContext
from covey.spec import AgentSpec
from covey.status import AgentStatus
from covey.store.outbox import Message
from covey.worker import loop, slots
from covey.worker.agent_state import dump_checkpoint
from covey.worker.completion import Kind
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


@pytest.fixture
def holder(deps, tenant):
    """An agent whose step holds the scope's one slot, given back when the test ends:
    a slot left held is renewed by this process's thread after the test's Redis is gone."""
    state, _ = begin(deps, tenant)
    assert slots.take(deps, state) is None  # the one slot, held by a step in flight
    yield state
    slots.give_back(deps, state.ctx.job_id, "root")


def begin(deps, tenant, budget: Budget | None = None):
    ctx = RunContext(
        job_id=f"slots-{uuid.uuid4().hex}", agent_id="root", budget=budget or Budget(), scopes=["global", tenant]
    )
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(scopes=ctx.scopes))
    return loop.begin(deps, ctx, AgentSpec(task="What is 2 * 21?", tools=[]))


def test_an_agent_over_the_cap_waits_saying_so_and_runs_once_the_slot_is_given_back(deps, tenant, holder):
    state, action = begin(deps, tenant)
    out = loop.advance(deps, state, action)
    assert isinstance(out, loop.Paused) and out.hop is not None
    assert out.hop.wait.reason == f"{tenant} running cap 1/1"
    assert 0 < out.hop.seconds <= slots.MAX_HOP_SECONDS
    assert deps.slots.waiting(tenant) == 1
    assert out.state.cycle == 0 and deps.slots.running(tenant) == 1  # it called nothing and holds nothing
    assert out.state.node(AgentStatus.WAITING).wait == out.hop.wait

    assert slots.give_back(deps, holder.ctx.job_id, "root") == []  # the waiter saved no next step to wake here
    done = loop.advance(deps, out.state, out.action)
    assert isinstance(done, loop.Finished) and done.result.output == "42"
    assert deps.tree.node(state.ctx.job_id, "root").wait is None
    slots.give_back(deps, state.ctx.job_id, "root")
    assert deps.slots.running(tenant) == 0


def save_waiting(deps, out: loop.Paused) -> None:
    """What the task does with a hop: checkpoint, recording its next step with the countdown."""
    ctx = out.state.ctx
    then = Message(wire.PROCEED, ctx.job_id, {"job_id": ctx.job_id, "agent_id": "root", "step": 1}, {"countdown": 9})
    assert deps.checkpoints.save(
        ctx.job_id, "root", 1, dump_checkpoint(out.state), None, then, node=out.state.node(AgentStatus.WAITING)
    )


def test_a_slot_given_back_wakes_the_first_waiter_still_waiting_and_keeps_the_rest_queued(deps, tenant, holder):
    waiters = []
    for _ in range(3):
        state, action = begin(deps, tenant)
        waiters.append(loop.advance(deps, state, action))
    deps.cancels.cancel_job(waiters[0].state.ctx.job_id)  # the first ended meanwhile: it has no next step
    for out in waiters[1:]:
        save_waiting(deps, out)
    (woken,) = slots.give_back(deps, holder.ctx.job_id, "root")
    assert woken.kwargs["job_id"] == waiters[1].state.ctx.job_id  # the first that still waits, in order
    assert "countdown" not in woken.options  # sent at once
    assert deps.slots.waiting(tenant) == 1  # the third keeps its place


def test_a_cancelled_or_late_agent_ends_instead_of_waiting_again(deps, tenant, holder):
    cancelled, action = begin(deps, tenant)
    deps.cancels.cancel_job(cancelled.ctx.job_id)
    assert loop.advance(deps, cancelled, action).result.status is AgentStatus.CANCELLED
    late, action = begin(deps, tenant, budget=Budget(deadline=deps.now() - timedelta(seconds=1)))
    assert loop.advance(deps, late, action).result.status is AgentStatus.TIMED_OUT


def test_a_hop_ends_before_the_broker_would_hand_its_message_to_another_worker():
    default = Settings()
    assert slots.longest_hop(default) == slots.MAX_HOP_SECONDS
    tight = Settings(slice_seconds=1, model_timeout=2, model_retries=0, visibility_timeout=6)
    assert slots.longest_hop(tight) == 1.5  # (6 - 1 - 2) / 2: the countdown and the step after it fit in 6 s


def test_a_copy_of_a_step_that_another_copy_ran_meanwhile_is_dropped_before_its_model_call(deps, tenant, holder):
    """The woken copy of a waiting agent's step and its counted-down original both
    took the step up; one ran it whole while the other was held up: the late one
    neither holds the slot nor calls the model again."""
    out = loop.advance(deps, *begin(deps, tenant))
    save_waiting(deps, out)
    job_id = out.state.ctx.job_id
    stored = deps.outbox.expected(job_id, "root")
    late = copy.deepcopy(out.state)  # the copy held up after it read the checkpoint
    (woken,) = slots.give_back(deps, holder.ctx.job_id, "root")
    assert woken.kwargs["job_id"] == job_id
    done = loop.advance(deps, out.state, out.action, "woken", taken=stored)
    assert isinstance(done, loop.Finished) and done.result.output == "42"
    slots.give_back(deps, job_id, "root", "woken")
    spent = deps.ledger.snapshot(job_id)
    dropped = loop.advance(deps, late, out.action, "late", taken=stored)
    assert dropped.kind is Kind.DROP and "ran already" in dropped.reason
    assert deps.ledger.snapshot(job_id) == spent  # no second call reserved or charged
    assert deps.slots.running(tenant) == 0

    # The copy that ran was the one a live worker took from this quiet one: that is the reason given.
    quiet = dataclasses.replace(deps, still_held=lambda: False)
    dropped = loop.advance(quiet, late, out.action, "late", taken=stored)
    assert dropped.kind is Kind.DROP and "put back on its queue by another worker" in dropped.reason
    assert deps.ledger.snapshot(job_id) == spent
