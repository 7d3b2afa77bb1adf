"""Agents under a scope's per-minute window give their slot back until the next
minute, on a real Redis ledger and the sim model, with a clock the test moves
(no real minutes): each hop's countdown is waited out by moving it."""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from covey import keys
from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentTerms
from covey.budgets.redis_ledger import RedisLedger
from covey.config.settings import Settings
from covey.context import RunContext
from covey.spec import AgentSpec
from covey.status import AgentStatus
from covey.worker import loop, slots
from covey.worker.deps import Deps

# One call reserves its prompt (about 45 tokens, counted as the sim bills) and its
# 200-token reply: a minute's window holds one, and too little of a second's least.
TOKENS_PER_MINUTE = 300


class Time:
    """One clock for the ledger and the loop; waiting out a countdown moves it."""

    def __init__(self) -> None:
        self.t = 60 * 30_000 + 5.0
        self.slept: list[float] = []

    def time(self) -> float:
        return self.t

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.t, UTC)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


class SettleLog(RedisLedger):
    """The real ledger, noting the minute each settle charged a scope in."""

    def __init__(self, client, clock) -> None:
        super().__init__(client, keys.DEFAULT_JOB_TTL_SECONDS, clock=clock)
        self.charged: dict[int, int] = defaultdict(int)

    def settling(self, job_id, chain, scopes, reservation_id, tokens, record=None, cost=0, event=""):
        self.charged[int(self.clock() // 60)] += tokens  # a settlement runs in the minute it is made
        return super().settling(job_id, chain, scopes, reservation_id, tokens, record, cost, event)


@pytest.fixture
def time_():
    return Time()


@pytest.fixture
def deps(redis_server, time_):
    deps = Deps.from_settings(Settings(redis_url=redis_server.url, model_retries=0))
    deps.ledger = SettleLog(deps.redis, time_.time)
    deps.now = time_.now
    return deps


@pytest.fixture
def tenant(deps):
    name = f"tenant:{uuid.uuid4().hex[:8]}"
    deps.ledger.set_scope(name, None, None, tokens_per_minute=TOKENS_PER_MINUTE)
    return name


def run(deps, time_, tenant, task, deadline=None):
    """The job's result and what it said it waited for at each hop."""
    waits = []
    ctx = RunContext(
        job_id=f"rate-{uuid.uuid4().hex}",
        agent_id="root",
        budget=Budget(deadline=deadline),
        scopes=["global", tenant],
        allow=[],
    )
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(scopes=ctx.scopes))
    state, action = loop.begin(deps, ctx, AgentSpec(task=task, max_call_tokens=200, tools=[]))
    outcome = loop.advance(deps, state, action)
    while isinstance(outcome, loop.Paused):  # what the proceed message sent after its countdown does
        assert outcome.hop is not None and outcome.hop.wait.reason == (
            f"the per-minute window of scope {tenant} (tokens per minute)"
        )
        assert 0 < outcome.hop.seconds <= slots.MAX_HOP_SECONDS
        waits.append(outcome.hop.wait.said(time_.now()))
        time_.sleep(outcome.hop.seconds)
        outcome = loop.advance(deps, outcome.state, outcome.action)
    return outcome.result, waits


def test_two_jobs_sharing_a_window_are_paced_by_it_and_both_complete(deps, tenant, time_):
    first, _ = run(deps, time_, tenant, "What is 2 * 21?")
    second, waits = run(deps, time_, tenant, "What is 3 + 4?")
    assert (first.status, first.output) == (AgentStatus.COMPLETED, "42"), first.error
    assert (second.status, second.output) == (AgentStatus.COMPLETED, "7")
    assert time_.slept, "the window never filled: the test spends too little to show pacing"
    assert sum(time_.slept) < 60, "a wait for the next minute is never longer than the minute"
    assert waits[0].startswith(f"the per-minute window of scope {tenant} (tokens per minute), ~")
    assert len(deps.ledger.charged) >= 2
    assert max(deps.ledger.charged.values()) <= TOKENS_PER_MINUTE
    assert sum(deps.ledger.charged.values()) == first.usage.total_tokens + second.usage.total_tokens


def test_a_wait_that_would_pass_the_deadline_times_the_agent_out(deps, tenant, time_):
    run(deps, time_, tenant, "What is 2 * 21?")  # fills this minute's window
    late, _ = run(deps, time_, tenant, "What is 3 + 4?", deadline=time_.now() + timedelta(seconds=5))
    assert late.status is AgentStatus.TIMED_OUT
    assert late.error.endswith("the next minute's window opens after the deadline")
    assert f"scope {tenant} is at its {TOKENS_PER_MINUTE} tokens per minute" in late.error
    assert time_.slept == []
