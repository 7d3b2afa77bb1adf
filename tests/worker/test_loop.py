"""The generic loop on a real Redis ledger and the sim model, without Celery."""

from __future__ import annotations

import uuid

import pytest

from covey.budgets.budget import Budget
from covey.config.settings import Settings
from covey.context import RunContext
from covey.results import Status
from covey.spec import AgentSpec
from covey.worker import loop
from covey.worker.deps import Deps


@pytest.fixture
def deps(redis_server):
    return Deps.from_settings(Settings(redis_url=redis_server.url, model_retries=0))


def root(deps, budget: Budget):
    job_id = f"loop-{uuid.uuid4().hex}"
    deps.ledger.open_root(job_id, "root", budget)
    return RunContext(job_id=job_id, agent_id="root", budget=budget)


def run(deps, ctx, task, **spec):
    state, action = loop.begin(deps, ctx, AgentSpec(task=task, **spec))
    return loop.advance(deps, state, action)


def test_a_leaf_finishes_and_the_ledger_holds_exactly_its_usage(deps):
    ctx = root(deps, Budget(max_tokens=10_000))
    out = run(deps, ctx, "What is 2 * 21?")
    assert isinstance(out, loop.Finished)
    assert out.result.status is Status.COMPLETED and out.result.output == "42"
    snap = deps.ledger.snapshot(ctx.job_id)
    assert snap.tokens_used == out.result.usage.total_tokens
    assert snap.cycles_used == out.result.usage.cycles == 2
    assert snap.tokens_reserved == 0


def test_a_spawn_returns_a_fan_out_with_deterministic_children(deps):
    ctx = root(deps, Budget(max_tokens=10_000, max_depth=2))
    out = run(deps, ctx, "[sim:spawn width=2 depth=1] go")
    assert isinstance(out, loop.FanOut)
    ids = [c.agent_id for c, _ in out.children]
    assert ids == [loop.child_agent_id("root", 1, 0), loop.child_agent_id("root", 1, 1)]
    assert all(c.depth == 1 and c.budget.max_depth == 1 and c.budget.max_tokens == 5000 for c, _ in out.children)
    assert [n.status for n in deps.tree.nodes(ctx.job_id)] == ["running", "queued", "queued"]


def test_spawning_at_the_depth_cap_resumes_at_once_with_the_refusal(deps):
    ctx = root(deps, Budget(max_tokens=10_000, max_depth=0))
    out = run(deps, ctx, "[sim:spawn width=2 depth=1] go")
    assert isinstance(out, loop.Finished)
    assert out.result.output.startswith("leaves=0 (2 not completed: spawn refused: depth cap reached")
    assert [c.status for c in out.result.children] == [Status.BUDGET_EXCEEDED] * 2


def test_the_agent_cycle_cap_ends_a_loop(deps):
    ctx = root(deps, Budget(max_tokens=100_000))
    out = run(deps, ctx, "[sim:loop] spin", max_cycles=3)
    assert out.result.status is Status.BUDGET_EXCEEDED
    assert out.result.usage.cycles == 3
    assert "max_cycles=3" in out.result.error


def test_a_token_cap_refuses_the_call_that_cannot_fit(deps):
    ctx = root(deps, Budget(max_tokens=150))
    out = run(deps, ctx, "What is 1 + 1?")
    assert out.result.status is Status.BUDGET_EXCEEDED
    assert out.result.error.startswith("token budget exhausted at agent root")
    assert deps.ledger.snapshot(ctx.job_id).tokens_used <= 150


def test_a_cancelled_job_stops_before_calling_the_model(deps):
    ctx = root(deps, Budget())
    deps.ledger.cancel(ctx.job_id)
    out = run(deps, ctx, "What is 1 + 1?")
    assert out.result.status is Status.CANCELLED
    assert out.result.usage.cycles == 0


def test_a_model_that_keeps_failing_fails_the_agent(deps):
    ctx = root(deps, Budget())
    out = run(deps, ctx, "[sim:fail 500] hi")
    assert out.result.status is Status.FAILED
    assert out.result.error.startswith("model call failed: HTTP 500")
    assert deps.ledger.snapshot(ctx.job_id).tokens_reserved == 0


def test_an_agent_task_ends_before_the_broker_would_redeliver_it(redis_server):
    deps = Deps.from_settings(Settings(redis_url=redis_server.url, max_agent_seconds=0.3))
    ctx = root(deps, Budget())
    out = run(deps, ctx, "[sim:loop] [sim:latency 50] spin", max_cycles=1000)
    assert out.result.status is Status.TIMED_OUT
    assert out.result.error == "agent task ran past COVEY_MAX_AGENT_SECONDS=0.3"
    assert 0 < out.result.usage.cycles < 1000
