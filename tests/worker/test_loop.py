"""The generic loop on a real Redis ledger and the sim model, without Celery."""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from covey import keys
from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentTerms
from covey.budgets.redis_ledger import RedisLedger
from covey.config.settings import Settings
from covey.context import RunContext
from covey.errors import StateLost
from covey.models.tokenizers import SimTokenizer
from covey.models.tokens import estimate_prompt_tokens
from covey.orchestration.actions import Cancel, ChildRequest, Spawn, from_json, to_json
from covey.orchestration.prompts import opening
from covey.results import ChildSummary
from covey.spec import AgentSpec, InvalidSpec
from covey.status import AgentStatus, Cause, CauseKind, Resource
from covey.worker import loop
from covey.worker.agent_state import dump_checkpoint, load_checkpoint
from covey.worker.completion import Completion, Kind
from covey.worker.deps import Deps
from covey.worker.spawning import child_agent_id, child_spec


@pytest.fixture
def deps(redis_server):
    return Deps.from_settings(Settings(redis_url=redis_server.url, model_retries=0))


def root(deps, budget: Budget):
    return RunContext(job_id=f"loop-{uuid.uuid4().hex}", agent_id="root", budget=budget)


def run(deps, ctx, task, **fields):
    """Open the root as ``covey.run_job`` does, with the spec's terms, and run it."""
    spec = AgentSpec(task=task, **fields)
    terms = AgentTerms(tools=spec.tools, deny=spec.deny, max_cycles=spec.max_cycles)
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, terms)
    state, action = loop.begin(deps, ctx, spec)
    return loop.advance(deps, state, action)


def test_a_step_taken_from_its_worker_before_its_call_is_sent_drops_and_the_call_is_never_sent(deps):
    """A worker paused past its heartbeat between the step's check and its model call
    (the other worker took the step meanwhile) learns it before sending: one call, not two."""
    ctx = root(deps, Budget(max_tokens=10_000))
    held = iter([True, False])  # at the step's start; by the time its call is reserved
    paused = dataclasses.replace(deps, llm=CountingLLM(deps.llm), still_held=lambda: next(held))
    out = run(paused, ctx, "What is 2 * 21?")
    assert isinstance(out, Completion) and out.kind is Kind.DROP
    assert "put back on its queue by another worker" in out.reason
    assert paused.llm.calls == 0

    again = run_again(deps, ctx, AgentSpec(task="What is 2 * 21?"))[0]  # the worker that took it
    assert isinstance(again, loop.Finished) and again.result.output == "42"
    assert deps.ledger.snapshot(ctx.job_id).tokens_reserved == 0  # the reservation was taken up, not left


class PausedAtTools(RedisLedger):
    """The real ledger, its worker paused past its heartbeat as a tool call is
    counted (``held`` turns False); counting the tool results it keeps, one per run."""

    def __init__(self, client) -> None:
        super().__init__(client, keys.DEFAULT_JOB_TTL_SECONDS)
        self.held, self.kept = True, 0

    def count_tool_call(self, *args, **kwargs):
        self.held = False
        return super().count_tool_call(*args, **kwargs)

    def record_tool_call(self, *args, **kwargs):
        self.kept += 1
        return super().record_tool_call(*args, **kwargs)


def test_a_step_taken_from_its_worker_before_its_tool_runs_drops_and_the_tool_runs_once(deps):
    """As for a model call: the copy of a step another worker took runs no tool, so a
    tool with effects outside covey has them once, by the worker that took the step."""
    ctx = root(deps, Budget(max_tokens=10_000))
    ledger = PausedAtTools(deps.redis)
    paused = dataclasses.replace(deps, ledger=ledger, still_held=lambda: ledger.held)
    out = run(paused, ctx, "What is 2 * 21?")  # a call asking for the calculator, the tool, the answer's call
    assert isinstance(out, Completion) and out.kind is Kind.DROP
    assert ledger.kept == 0  # the calculator never ran here

    taker = dataclasses.replace(deps, ledger=PausedAtTools(deps.redis))  # still held: the worker that took it
    again = run_again(taker, ctx, AgentSpec(task="What is 2 * 21?"))[0]
    assert isinstance(again, loop.Finished) and again.result.output == "42"
    assert taker.ledger.kept == 1
    snap = deps.ledger.snapshot(ctx.job_id)
    assert (snap.tool_calls_used, snap.tokens_reserved) == (1, 0)  # counted once, across both copies


def test_a_leaf_finishes_and_the_ledger_holds_exactly_its_usage(deps):
    ctx = root(deps, Budget(max_tokens=10_000))
    out = run(deps, ctx, "What is 2 * 21?")
    assert isinstance(out, loop.Finished)
    assert out.result.status is AgentStatus.COMPLETED and out.result.output == "42"
    snap = deps.ledger.snapshot(ctx.job_id)
    assert snap.tokens_used == out.result.usage.total_tokens
    assert snap.cycles_used == out.result.usage.cycles == 2
    assert snap.tokens_reserved == 0


def test_a_spawn_returns_a_fan_out_with_deterministic_children(deps):
    ctx = root(deps, Budget(max_tokens=10_000, max_depth=2))
    out = run(deps, ctx, "[sim:spawn width=2 depth=1] go")
    assert isinstance(out, loop.FanOut)
    ids = [c.agent_id for c, _ in out.children]
    assert ids == [child_agent_id("root", 1, 0), child_agent_id("root", 1, 1)]
    assert all(c.depth == 1 and c.budget.max_depth == 1 and c.budget.max_tokens == 5000 for c, _ in out.children)
    assert [n.status for n in deps.tree.nodes(ctx.job_id)] == ["running", "queued", "queued"]


def test_at_the_depth_cap_no_spawn_tool_is_offered(deps):
    ctx = root(deps, Budget(max_tokens=10_000, max_depth=0))
    out = run(deps, ctx, "[sim:spawn width=2 depth=1] go")
    assert isinstance(out, loop.Finished)
    assert (out.result.output, out.result.children) == ("done: go", [])  # a leaf: it had nothing to spawn with


def test_with_no_agent_left_no_spawn_tool_is_offered(deps):
    ctx = root(deps, Budget(max_tokens=10_000, max_agents=0))
    out = run(deps, ctx, "[sim:spawn width=2 depth=1] go")
    assert (out.result.output, out.result.children) == ("done: go", [])


def test_a_strategys_spawn_at_the_depth_cap_resumes_at_once_with_the_refusal(deps):
    ctx = root(deps, Budget(max_tokens=10_000, max_depth=0))
    out = run(deps, ctx, "What is 1 + 1?", strategy="debate", options={"num_debaters": 2})
    assert isinstance(out, loop.Finished) and out.result.status is AgentStatus.FAILED
    assert out.result.error.startswith("no debater proposed an answer: debater 0 budget_exceeded: spawn refused: depth")
    assert [c.status for c in out.result.children] == [AgentStatus.BUDGET_EXCEEDED] * 2
    assert [c.cause for c in out.result.children] == [
        Cause(kind=CauseKind.BUDGET, agent_id="root", resource=Resource.DEPTH)
    ] * 2


def test_the_agent_cycle_cap_ends_a_loop(deps):
    ctx = root(deps, Budget(max_tokens=100_000))
    out = run(deps, ctx, "[sim:loop] spin", max_cycles=3)
    assert out.result.status is AgentStatus.BUDGET_EXCEEDED
    assert out.result.usage.cycles == 3
    assert "max_cycles=3" in out.result.error
    assert out.result.cause == Cause(kind=CauseKind.BUDGET, agent_id="root", resource=Resource.CYCLES)


def test_a_token_cap_refuses_the_call_that_cannot_fit(deps):
    ctx = root(deps, Budget(max_tokens=150))
    out = run(deps, ctx, "What is 1 + 1?", wrap_up=False)
    assert out.result.status is AgentStatus.BUDGET_EXCEEDED
    assert out.result.error.startswith("token budget exhausted at agent root")
    assert out.result.cause == Cause(kind=CauseKind.BUDGET, agent_id="root", resource=Resource.TOKENS)
    assert deps.ledger.snapshot(ctx.job_id).tokens_used <= 150


def test_a_cancelled_job_stops_before_calling_the_model(deps):
    ctx = root(deps, Budget())
    deps.cancels.cancel_job(ctx.job_id)
    out = run(deps, ctx, "What is 1 + 1?")
    assert out.result.status is AgentStatus.CANCELLED
    assert out.result.cause == Cause(kind=CauseKind.CANCELLED)
    assert out.result.usage.cycles == 0


def test_a_model_that_keeps_failing_fails_the_agent(deps):
    ctx = root(deps, Budget())
    out = run(deps, ctx, "[sim:fail 500] hi")
    assert out.result.status is AgentStatus.FAILED
    assert out.result.error.startswith("model call failed: HTTP 500")
    assert out.result.cause == Cause(kind=CauseKind.MODEL_ERROR, status=500)
    assert deps.ledger.snapshot(ctx.job_id).tokens_reserved == 0


def test_a_429_the_sdk_does_not_retry_fails_the_agent_rate_limited(deps):
    ctx = root(deps, Budget())
    out = run(deps, ctx, "[sim:fail 429] hi")
    assert out.result.status is AgentStatus.FAILED
    assert out.result.cause == Cause(
        kind=CauseKind.RATE_LIMITED, status=429, retry_after=0.02
    )  # the sim's retry-after-ms


def test_a_refusal_by_a_global_scope_names_the_scope(deps):
    scope = f"sweep:{uuid.uuid4().hex[:8]}"
    deps.ledger.set_scope(scope, 10, None)
    ctx = root(deps, Budget()).model_copy(update={"scopes": [scope]})
    spec = AgentSpec(task="What is 1 + 1?")
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(scopes=[scope]))
    out = loop.advance(deps, *loop.begin(deps, ctx, spec))
    assert out.result.status is AgentStatus.BUDGET_EXCEEDED
    assert out.result.cause == Cause(kind=CauseKind.BUDGET, scope=scope, resource=Resource.TOKENS)


def test_an_agent_pauses_at_each_slice_and_goes_on_where_it_stopped(redis_server):
    deps = Deps.from_settings(Settings(redis_url=redis_server.url, slice_seconds=0.2))
    ctx = root(deps, Budget())
    spec = AgentSpec(task="[sim:loop] [sim:latency 50] spin", max_cycles=12)
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(max_cycles=spec.max_cycles))
    state, action = loop.begin(deps, ctx, spec)
    pauses = 0
    while isinstance(out := loop.advance(deps, state, action), loop.Paused):
        pauses += 1
        paused = out.state.model_copy(update={"next_action": to_json(out.action)})
        state = load_checkpoint(dump_checkpoint(paused))  # as checkpointed
        state, action = loop.proceed(deps, state)
    assert pauses >= 1
    assert out.result.status is AgentStatus.BUDGET_EXCEEDED and out.result.usage.cycles == 12
    assert deps.ledger.snapshot(ctx.job_id).cycles_used == 12


class CountingLLM:
    """The real LLM, counting the calls that reach it; ``die_at`` makes that call
    raise as a worker dying mid-call would (after the earlier calls settled)."""

    def __init__(self, llm, die_at: int | None = None) -> None:
        self.llm, self.die_at, self.calls = llm, die_at, 0
        self.catalog = llm.catalog

    def __getattr__(self, name):  # the rest is the real LLM's
        return getattr(self.llm, name)

    def call(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.die_at:
            raise SystemExit("worker died mid-call")
        return self.llm.call(*args, **kwargs)


def dies_in_call(deps: Deps, ctx: RunContext, spec: AgentSpec, n: int) -> None:
    """The agent's step run until its ``n``-th model call, where its worker dies (the
    calls before it settled); ``deps`` keep the real model for the next run."""
    real = deps.llm
    deps.llm = CountingLLM(real, die_at=n)
    try:
        with pytest.raises(SystemExit):
            loop.advance(deps, *loop.begin(deps, ctx, spec))
    finally:
        deps.llm = real


def run_again(
    deps: Deps, ctx: RunContext, spec: AgentSpec
) -> tuple[loop.Finished | loop.FanOut | loop.Paused | Completion, CountingLLM]:
    """The step delivered again, to a new run of it: what it did, and the model calls it made."""
    deps.llm = counting = CountingLLM(deps.llm)
    return loop.advance(deps, *loop.begin(deps, ctx, spec)), counting


def test_a_reply_cut_at_the_per_call_cap_fails_and_says_how_to_raise_it(deps):
    ctx = root(deps, Budget(max_tokens=1_000_000, max_agents=300, max_depth=2))
    out = run(deps, ctx, "[sim:spawn width=200 depth=1] wide", max_call_tokens=1024)
    assert out.result.status is AgentStatus.FAILED
    assert out.result.error.startswith("the model's reply was cut at max_call_tokens=1024; raise it with")
    assert out.result.cause == Cause(kind=CauseKind.REPLY_CUT)
    assert out.result.output is None and out.result.usage.completion_tokens == 1024


def test_a_reply_cut_by_a_nearly_spent_budget_is_budget_exceeded(deps):
    ctx = root(deps, Budget(max_tokens=300))
    out = run(deps, ctx, "[sim:tokens 500] [sim:answer long] talk", tools=[], wrap_up=False)
    assert out.result.status is AgentStatus.BUDGET_EXCEEDED
    assert "all the token budget had left for it (max_call_tokens=4096)" in out.result.error
    assert out.result.cause == Cause(kind=CauseKind.BUDGET, resource=Resource.TOKENS)
    assert deps.ledger.snapshot(ctx.job_id).tokens_used <= 300


def test_a_grant_too_small_for_a_useful_reply_never_calls_the_model(deps):
    spec = AgentSpec(task="[sim:answer hi] hello", tools=[])
    estimate = estimate_prompt_tokens(opening(spec, root(deps, Budget())), [], SimTokenizer())  # the sim's exact count
    ctx = root(deps, Budget(max_tokens=estimate + 30))  # room for a 30-token reply, under the floor of 64
    deps.llm = counting = CountingLLM(deps.llm)
    out = run(deps, ctx, spec.task, tools=[], wrap_up=False)
    assert out.result.status is AgentStatus.BUDGET_EXCEEDED and counting.calls == 0
    assert out.result.error.endswith(f"({estimate + 30} left, {estimate + 64} needed)")


def test_a_rerun_step_replays_settled_calls_instead_of_calling_the_model(deps):
    ctx = root(deps, Budget(max_tokens=10_000))
    spec = AgentSpec(task="What is 2 * 21?")
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(max_cycles=spec.max_cycles))
    dies_in_call(deps, ctx, spec, 2)  # the calculator call settles, the answer call dies
    assert deps.ledger.snapshot(ctx.job_id).tokens_reserved > 0  # the dying call's hold is kept

    out, rerun = run_again(deps, ctx, spec)  # the broker redelivers the step
    assert out.result.output == "42" and rerun.calls == 1
    snap = deps.ledger.snapshot(ctx.job_id)
    assert snap.tokens_used == out.result.usage.total_tokens and snap.cycles_used == out.result.usage.cycles == 2
    assert snap.tokens_reserved == 0


class SettledAlone(RedisLedger):
    """The real ledger, counting the settlements run in a round trip of their own;
    ``rides`` False as when its writes must reach replicas first."""

    def __init__(self, client, rides: bool = True) -> None:
        super().__init__(client, keys.DEFAULT_JOB_TTL_SECONDS)
        self.rides, self.alone = rides, 0

    def settled(self, settling):
        self.alone += 1
        return super().settled(settling)

    @property
    def settles_ride(self) -> bool:
        return self.rides


@pytest.mark.parametrize("rides, alone", [(True, 1), (False, 2)], ids=["carried", "with replicas"])
def test_an_end_carries_its_last_calls_settlement_and_a_step_that_goes_on_settles_first(deps, rides, alone):
    deps.ledger = SettledAlone(deps.redis, rides)
    ctx = root(deps, Budget(max_tokens=10_000))
    out = run(deps, ctx, "What is 2 * 21?")  # a call asking for the calculator, the tool, the answer's call
    assert (out.result.output, out.result.usage.cycles) == ("42", 2)
    assert deps.ledger.alone == alone  # carried: only the call the agent went on from
    snap = deps.ledger.snapshot(ctx.job_id)
    assert snap.tokens_used == out.result.usage.total_tokens and snap.tokens_reserved == 0


class WipingLLM(CountingLLM):
    """The real LLM, with the job's records wiped from Redis while its call runs."""

    def __init__(self, llm, redis, job_id: str) -> None:
        super().__init__(llm)
        self.redis, self.job_id = redis, job_id

    def call(self, *args, **kwargs):
        answer = super().call(*args, **kwargs)
        self.redis.delete(*self.redis.keys(f"covey:{{{self.job_id}}}:*"))
        return answer


def test_a_job_wiped_during_its_last_call_writes_no_final_record(deps):
    ctx = root(deps, Budget(max_tokens=10_000))
    deps.llm = WipingLLM(deps.llm, deps.redis, ctx.job_id)
    with pytest.raises(StateLost, match="missing"):
        run(deps, ctx, "What is 2 + 3?", strategy="single")
    assert deps.tree.node(ctx.job_id, "root") is None  # no completed node for a job whose records are gone
    assert deps.redis.keys(f"covey:{{{ctx.job_id}}}:*") == []


def test_a_single_child_with_a_schema_hands_back_data(deps):
    ctx = root(deps, Budget(max_tokens=10_000))
    schema = {"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]}
    out = run(deps, ctx, "What is 6 * 7?", strategy="single", options={"schema": schema})
    assert out.result.status is AgentStatus.COMPLETED
    assert out.result.data == {"value": 42}
    assert out.result.usage.cycles == 1


def test_a_reply_that_misses_the_schema_is_asked_again_then_fails_the_agent(deps):
    ctx = root(deps, Budget(max_tokens=10_000))
    schema = {"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]}
    out = run(deps, ctx, "[sim:fail bad_json] What is 6 * 7?", strategy="single", options={"schema": schema})
    assert out.result.status is AgentStatus.FAILED
    assert out.result.error == "model reply does not match the schema at the top level: 'value' is a required property"
    assert out.result.cause == Cause(kind=CauseKind.MALFORMED_REPLY)
    assert out.result.usage.cycles == 2  # the first ask and the one retry, both charged
    assert deps.ledger.snapshot(ctx.job_id).tokens_used == out.result.usage.total_tokens


def test_an_off_schema_reply_asked_again_once_comes_right(deps):
    ctx = root(deps, Budget(max_tokens=10_000))
    schema = {"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]}
    out = run(deps, ctx, "[sim:fail bad_json once] What is 6 * 7?", strategy="single", options={"schema": schema})
    assert (out.result.status, out.result.data, out.result.usage.cycles) == (AgentStatus.COMPLETED, {"value": 42}, 2)


def test_with_no_schema_retries_an_off_schema_reply_fails_at_once(deps):
    ctx = root(deps, Budget(max_tokens=10_000))
    schema = {"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]}
    task = "[sim:fail bad_json once] What is 6 * 7?"
    out = run(deps, ctx, task, strategy="single", options={"schema": schema}, max_schema_retries=0)
    assert (out.result.status, out.result.usage.cycles) == (AgentStatus.FAILED, 1)


def test_an_agent_runs_under_its_ledger_terms_not_its_message(deps):
    ctx = root(deps, Budget(max_tokens=10_000))
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(tools=["calculator"], max_cycles=5))
    forged = ctx.model_copy(update={"allow": None, "deny": []})
    state, _ = loop.begin(deps, forged, AgentSpec(task="x", max_cycles=500))
    assert state.ctx.allow == ["calculator"] and state.spec.max_cycles == 5
    stray = loop.begin(deps, ctx.model_copy(update={"agent_id": "root-sub-forged"}), AgentSpec(task="x"))
    assert stray.kind is Kind.DROP and "was never opened" in stray.reason


def test_a_child_gets_what_it_asks_for_within_its_parents_tools():
    parent = AgentSpec(task="lead", model="sim", max_cycles=9)
    ctx = RunContext(job_id="j", agent_id="root", budget=Budget(), allow=["calculator", "spawn_agents"])
    unset = child_spec(parent, ctx, ChildRequest(task="a"))
    assert unset.tools == ["spawn_agents", "calculator"] and unset.strategy == "react" and unset.max_cycles == 9
    asked = child_spec(
        parent,
        ctx,
        ChildRequest(
            task="b",
            tools=["write_file", "calculator"],
            strategy="single",
            options={"schema": {"type": "object"}},
            model="gpt-x",
        ),
    )
    assert (asked.tools, asked.strategy, asked.model) == (["calculator"], "single", "gpt-x")
    with pytest.raises(InvalidSpec, match="options.schema"):
        child_spec(parent, ctx, ChildRequest(task="c", strategy="single", options={"schema": 3}))


def test_a_child_keeps_its_parents_way_of_being_shown_what_it_does():
    parent = AgentSpec(task="lead", model="sim", stream=True, budget_notice=True, wrap_up=False)
    ctx = RunContext(job_id="j", agent_id="root", budget=Budget())
    child = child_spec(parent, ctx, ChildRequest(task="a"))
    assert child.stream and child.budget_notice and not child.wrap_up
    plain = child_spec(AgentSpec(task="lead", model="sim"), ctx, ChildRequest(task="a"))
    assert not plain.stream and plain.wrap_up


def test_a_child_requests_its_own_timeout_and_a_bad_one_is_refused_naming_it():
    parent = AgentSpec(task="lead", model="sim", timeout=60)
    ctx = RunContext(job_id="j", agent_id="root", budget=Budget())
    assert child_spec(parent, ctx, ChildRequest(task="a", timeout=1)).timeout == 1
    assert child_spec(parent, ctx, ChildRequest(task="a")).timeout == 60
    with pytest.raises(InvalidSpec, match="timeout"):
        child_spec(parent, ctx, ChildRequest(task="a", timeout=0))


def test_a_paused_join_each_spawn_or_cancel_is_taken_up_as_it_was():
    state = AgentSpec(task="x")  # any model stands for the strategy's state here
    spawn = Spawn(state=state, children=[ChildRequest(task="a", key="k", timeout=2.5)], join="each")
    for action in (spawn, Cancel(state=state, agent_ids=["root-sub-1"])):
        assert from_json(json.loads(json.dumps(to_json(action))), state) == action


def test_a_child_that_cannot_spawn_gets_no_spawn_tool_and_no_more_cycles_than_its_parent():
    parent = AgentSpec(task="lead", max_cycles=9, max_schema_retries=2)
    ctx = RunContext(job_id="j", agent_id="root", budget=Budget(), allow=["calculator", "spawn_agents", "delegate"])
    leaf = child_spec(parent, ctx, ChildRequest(task="a", can_spawn=False, max_cycles=3))
    assert (leaf.tools, leaf.max_cycles, leaf.max_schema_retries) == (["calculator"], 3, 2)
    assert child_spec(parent, ctx, ChildRequest(task="a", max_cycles=50)).max_cycles == 9


class Clock:
    """A clock the test moves: each model call takes ``call_seconds``."""

    def __init__(self, call_seconds: float) -> None:
        self.now = datetime.now(UTC)
        self.call_seconds = call_seconds

    def __call__(self) -> datetime:
        return self.now


class SlowLLM:
    def __init__(self, llm, clock: Clock) -> None:
        self.llm, self.clock = llm, clock
        self.catalog = llm.catalog

    def __getattr__(self, name):  # the rest is the real LLM's
        return getattr(self.llm, name)

    def call(self, *args, **kwargs):
        reply = self.llm.call(*args, **kwargs)
        self.clock.now += timedelta(seconds=self.clock.call_seconds)
        return reply


def test_a_reply_that_comes_after_the_deadline_times_the_agent_out_and_is_charged(deps):
    clock = Clock(call_seconds=10)
    deps.now, deps.llm = clock, SlowLLM(deps.llm, clock)
    ctx = root(deps, Budget(max_tokens=10_000))
    out = run(deps, ctx, "What is 2 + 2?", timeout=5)
    assert out.result.status is AgentStatus.TIMED_OUT
    assert out.result.error == "agent timeout of 5.0s passed during a model call"
    assert out.result.cause == Cause(kind=CauseKind.DEADLINE)
    assert out.result.usage.cycles == 1 and out.result.usage.total_tokens > 0
    assert deps.ledger.snapshot(ctx.job_id).tokens_used == out.result.usage.total_tokens


def test_an_agent_charges_the_scopes_its_ledger_row_holds_not_its_messages(deps):
    ctx = root(deps, Budget(max_tokens=10_000))
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(scopes=["global", "tenant:acme"]))
    state, _ = loop.begin(deps, ctx.model_copy(update={"scopes": ["global"]}), AgentSpec(task="x"))
    assert state.ctx.scopes == ["global", "tenant:acme"]


def test_a_child_writes_and_charges_where_its_ledger_row_puts_it_not_its_message(deps):
    ctx = root(deps, Budget(max_tokens=100_000, max_depth=2))
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(scopes=["global"]))
    child = child_agent_id("root", 1, 0)
    assert deps.ledger.open(ctx.job_id, ["root"], child, Budget(max_tokens=10_000, max_depth=1)).ok
    # A message that puts the child at the top of the tree: no ancestors, the whole workspace its own.
    forged = RunContext(job_id=ctx.job_id, agent_id=child, budget=Budget(max_depth=5), subroot="")
    state, action = loop.begin(deps, forged, AgentSpec(task="[sim:write pwned.md] pwned", tools=["write_file"]))
    assert (state.ctx.ancestors, state.ctx.parent_id, state.ctx.subroot) == (["root"], "root", f".sub_agents/{child}")
    out = loop.advance(deps, state, action)
    assert out.result.status is AgentStatus.COMPLETED, out.result.error
    assert deps.workspace(ctx.job_id).files() == [f".sub_agents/{child}/pwned.md"]
    rows = {row.agent_id: row for row in deps.ledger.snapshot(ctx.job_id).agents}
    assert rows["root"].tokens_used == rows[child].tokens_used == out.result.usage.total_tokens > 0


def test_a_child_opened_by_its_parent_starts_from_its_ledger_row_alone(deps):
    """A child's message names only the agent: its spec, tools, caps, scopes and place
    in the tree are what its parent's spawn wrote on its row."""
    ctx = root(deps, Budget(max_tokens=100_000, max_depth=2))
    ctx = ctx.model_copy(update={"allow": ["calculator", "spawn_agents"], "child_fraction": 0.25})
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(scopes=["global"]))
    state, action = loop.begin(deps, ctx, AgentSpec(task="lead", strategy="orchestrate", tools=ctx.allow))
    out = loop.advance(deps, state, action)
    assert isinstance(out, loop.FanOut), out
    (sent, spec), *_ = out.children
    row = deps.ledger.agent(ctx.job_id, sent.agent_id)
    assert row.spec == spec.model_dump_json() and row.child_fraction == 0.25
    started, _ = loop.begin_opened(deps, ctx.job_id, sent.agent_id, row)
    assert started.spec == spec
    assert started.ctx == sent  # the context its parent placed it in, read back from the row alone
    never = loop.begin_opened(deps, ctx.job_id, "root-sub-nobody", None)
    assert never.kind is Kind.DROP and "was never opened" in never.reason
    rootless = loop.begin_opened(deps, ctx.job_id, "root", deps.ledger.agent(ctx.job_id, "root"))
    assert rootless.kind is Kind.DROP  # a row with no spec was opened by no parent


def test_a_strategys_finish_without_a_cause_takes_its_latest_like_childs_or_gives_up():
    refused = Cause(kind=CauseKind.BUDGET, scope="sweep:s1", resource=Resource.TOKENS)
    children = [
        ChildSummary(agent_id=f"c{i}", role="agent", status=status, cause=cause)
        for i, (status, cause) in enumerate(
            [
                (AgentStatus.BUDGET_EXCEEDED, Cause(kind=CauseKind.BUDGET)),
                (AgentStatus.BUDGET_EXCEEDED, refused),
                (AgentStatus.FAILED, Cause(kind=CauseKind.INTERNAL)),
            ]
        )
    ]
    assert loop._strategy_cause(AgentStatus.BUDGET_EXCEEDED, children) == refused
    assert loop._strategy_cause(AgentStatus.TIMED_OUT, children) == Cause(kind=CauseKind.DEADLINE)
    assert loop._strategy_cause(AgentStatus.FAILED, children) == Cause(kind=CauseKind.GAVE_UP)
    assert loop._strategy_cause(AgentStatus.COMPLETED, children) is None
