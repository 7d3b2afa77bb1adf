"""The one generic loop that interprets a strategy's Actions.

It runs an agent until it finishes or asks for children. Before every model call
it checks cancel and deadlines and reserves the worst case on the ledger; after it,
it settles the real usage. A fan-out is returned to the task, which checkpoints
and replaces itself with a chord, so no worker slot waits on children.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.orchestration import registry
from covey.orchestration.actions import (
    Action,
    CallModel,
    ChildRequest,
    ChildResults,
    Finish,
    ModelReply,
    RunTools,
    Spawn,
    ToolResults,
)
from covey.orchestration.tool_schemas import TOOL_SCHEMAS, offered
from covey.results import AgentResult, Status, Usage
from covey.spec import AgentSpec
from covey.store.tree import QUEUED, RUNNING, Node
from covey.worker.agent_state import AgentState, PendingChild
from covey.worker.deps import Deps
from covey.models.llm import ModelError
from covey.models.tokens import estimate_prompt_tokens
from covey.worker.tools import run_tool


@dataclass(frozen=True)
class Finished:
    result: AgentResult


@dataclass(frozen=True)
class FanOut:
    state: AgentState
    children: list[tuple[RunContext, AgentSpec]]


def child_agent_id(parent_id: str, spawn_round: int, index: int) -> str:
    """Deterministic, so a redelivered parent step re-opens the same children."""
    digest = hashlib.sha1(f"{parent_id}/{spawn_round}/{index}".encode()).hexdigest()[:8]
    return f"{parent_id}-sub-{digest}"


def begin(deps: Deps, ctx: RunContext, spec: AgentSpec) -> tuple[AgentState, Action]:
    now = deps.now()
    state = AgentState(
        ctx=ctx,
        spec=spec,
        started_at=now,
        deadline=now + timedelta(seconds=spec.timeout) if spec.timeout else None,
        task_deadline=_task_deadline(deps),
    )
    deps.tree.record(ctx.job_id, _node(state, RUNNING))
    return state, registry.strategy(spec.strategy).start(spec, ctx)


def _task_deadline(deps: Deps) -> datetime:
    """A task must end before the broker's visibility timeout would redeliver it
    to another worker; COVEY_MAX_AGENT_SECONDS is half of that timeout."""
    return deps.now() + timedelta(seconds=deps.settings.max_agent_seconds)


def join(deps: Deps, state: AgentState, results: list[dict[str, Any]]) -> tuple[AgentState, Action]:
    """Fold a finished fan-out back in, in the order the strategy asked for it."""
    state.task_deadline = _task_deadline(deps)
    by_id = {r.agent_id: r for r in (AgentResult.model_validate(d) for d in results)}
    ordered = []
    for pending in state.pending:
        result = (
            pending.refused
            or by_id.get(pending.agent_id)
            or _unreported(state.ctx, pending.agent_id, Status.FAILED, "child result missing from the join")
        )
        if pending.refused is None:
            state.usage += result.usage + Usage(agents=1)
        ordered.append(result)
    state.children += [r.summary() for r in ordered]
    state.pending = []
    action = registry.strategy(state.spec.strategy).resume(state.spec, state.ctx, state.strategy, ChildResults(ordered))
    return state, action


def advance(deps: Deps, state: AgentState, action: Action) -> Finished | FanOut:
    strategy = registry.strategy(state.spec.strategy)
    while True:
        state.strategy = action.state
        if isinstance(action, Finish):
            return _finish(deps, state, action.status, action.output, action.error)
        stop = _stop(deps, state, counts_cycle=isinstance(action, CallModel))
        if stop is not None:
            return _finish(deps, state, stop[0], None, stop[1])
        if isinstance(action, CallModel):
            outcome: Any = _call_model(deps, state, action.messages)
            if isinstance(outcome, Finished):
                return outcome
        elif isinstance(action, RunTools):
            workspace = deps.workspace(state.ctx.job_id)
            outcome = ToolResults({c.id: run_tool(c, state.ctx, workspace) for c in action.calls})
        elif isinstance(action, Spawn):
            fan_out = _spawn(deps, state, action)
            if fan_out.children:
                return fan_out
            state, action = join(deps, state, [])
            continue
        else:
            raise TypeError(f"unknown action {type(action).__name__}")
        action = strategy.resume(state.spec, state.ctx, state.strategy, outcome)


def _stop(deps: Deps, state: AgentState, counts_cycle: bool) -> tuple[Status, str] | None:
    """Why the agent must end before its next step, if it must."""
    ctx, now = state.ctx, deps.now()
    if deps.ledger.cancelled(ctx.job_id):
        return Status.CANCELLED, "job cancelled"
    if ctx.budget.expired(now):
        return Status.TIMED_OUT, "job deadline passed"
    if state.deadline is not None and now >= state.deadline:
        return Status.TIMED_OUT, f"agent timeout of {state.spec.timeout}s passed"
    if state.task_deadline is not None and now >= state.task_deadline:
        seconds = deps.settings.max_agent_seconds
        return Status.TIMED_OUT, f"agent task ran past COVEY_MAX_AGENT_SECONDS={seconds:g}"
    if counts_cycle and state.cycle >= state.spec.max_cycles:
        return Status.BUDGET_EXCEEDED, f"cycle cap reached: max_cycles={state.spec.max_cycles} for this agent"
    return None


def _call_model(deps: Deps, state: AgentState, messages: list[dict[str, Any]]) -> ModelReply | Finished:
    ctx, spec = state.ctx, state.spec
    tools = [TOOL_SCHEMAS[name] for name in offered(ctx.allow, ctx.deny)]
    estimate = estimate_prompt_tokens(messages, tools)
    state.cycle += 1
    rid = f"{ctx.agent_id}:{state.cycle}"
    grant = deps.ledger.reserve(
        ctx.job_id, ctx.chain, ctx.scopes, rid, tokens=estimate + spec.max_call_tokens, min_tokens=estimate + 1
    )
    if not grant.ok:
        status = Status.CANCELLED if grant.cancelled else Status.BUDGET_EXCEEDED
        return _finish(deps, state, status, None, grant.reason)
    # A replayed step (redelivery) gets its settled grant back, which may be under
    # today's estimate; the ledger charges it nothing either way.
    max_tokens = max(1, grant.tokens - estimate)
    try:
        reply, usage = deps.llm.call(spec.model, messages, tools, max_tokens, timeout=_seconds_left(deps, state))
    except BaseException as e:
        deps.ledger.settle(ctx.job_id, ctx.chain, ctx.scopes, rid, tokens=0)
        if not isinstance(e, ModelError):
            raise
        state.usage += Usage(cycles=1)
        # A call cut short by the deadline is the deadline's doing, not the model's.
        status, reason = _stop(deps, state, counts_cycle=False) or (Status.FAILED, str(e))
        return _finish(deps, state, status, None, reason)
    deps.ledger.settle(ctx.job_id, ctx.chain, ctx.scopes, rid, tokens=usage.total_tokens)
    state.usage += usage
    return reply


def _seconds_left(deps: Deps, state: AgentState) -> float | None:
    deadlines = [d for d in (state.deadline, state.ctx.budget.deadline, state.task_deadline) if d is not None]
    if not deadlines:
        return None
    return max(0.001, (min(deadlines) - deps.now()).total_seconds())


def _spawn(deps: Deps, state: AgentState, action: Spawn) -> FanOut:
    """Open every requested child on the ledger; the refused ones are answered at once."""
    ctx = state.ctx
    state.spawn_round += 1
    state.pending, children, queued = [], [], []
    for index, request in enumerate(action.children):
        child_id = child_agent_id(ctx.agent_id, state.spawn_round, index)
        budget, reason = _open(deps, ctx, child_id)
        if budget is None:
            refused = _unreported(ctx, child_id, Status.BUDGET_EXCEEDED, reason, request.role, deps.now())
            state.pending.append(PendingChild(agent_id=child_id, refused=refused))
            queued.append(Node.of(refused))
            continue
        child_ctx = ctx.child(child_id, _within(budget, state.deadline), allow=request.tools)
        children.append((child_ctx, _child_spec(state.spec, request)))
        state.pending.append(PendingChild(agent_id=child_id))
        queued.append(
            Node(agent_id=child_id, parent_id=ctx.agent_id, depth=child_ctx.depth, role=request.role, status=QUEUED)
        )
    deps.tree.record(ctx.job_id, *queued)
    return FanOut(state=state, children=children)


def _open(deps: Deps, ctx: RunContext, child_id: str) -> tuple[Budget | None, str]:
    """The child's clamped budget, or why it may not be spawned."""
    if ctx.budget.max_depth < 1:
        return None, f"spawn refused: depth cap reached (max_depth=0 at agent {ctx.agent_id})"
    opened = deps.ledger.open(ctx.job_id, ctx.chain, child_id, ctx.budget.child(ctx.child_fraction))
    return (opened.budget, "") if opened.ok else (None, opened.reason or "spawn refused")


def _child_spec(parent: AgentSpec, request: ChildRequest) -> AgentSpec:
    """A child runs the parent's model, strategy and caps on the task it was given."""
    return AgentSpec(
        task=request.task,
        role=request.role,
        instructions=request.instructions,
        model=parent.model,
        strategy=parent.strategy,
        tools=request.tools,
        max_cycles=parent.max_cycles,
        max_call_tokens=parent.max_call_tokens,
        timeout=parent.timeout,
    )


def _within(budget: Budget, deadline: datetime | None) -> Budget:
    """A child's budget ends no later than its parent's own timeout."""
    if deadline is None or (budget.deadline is not None and budget.deadline <= deadline):
        return budget
    return budget.model_copy(update={"deadline": deadline})


def _unreported(
    ctx: RunContext, child_id: str, status: Status, error: str, role: str = "agent", at: datetime | None = None
) -> AgentResult:
    """The result of a child that never reported one: refused at open, or lost from the join."""
    return AgentResult(
        job_id=ctx.job_id,
        agent_id=child_id,
        parent_id=ctx.agent_id,
        role=role,
        depth=ctx.depth + 1,
        status=status,
        error=error,
        started_at=at,
        finished_at=at,
    )


def _finish(deps: Deps, state: AgentState, status: Status, output: str | None, error: str | None) -> Finished:
    ctx = state.ctx
    result = AgentResult(
        job_id=ctx.job_id,
        agent_id=ctx.agent_id,
        parent_id=ctx.parent_id,
        role=state.spec.role,
        depth=ctx.depth,
        status=status,
        output=output,
        error=error,
        usage=state.usage,
        started_at=state.started_at,
        finished_at=deps.now(),
        children=state.children,
    )
    deps.tree.record(ctx.job_id, Node.of(result))
    return Finished(result)


def _node(state: AgentState, status: str) -> Node:
    ctx = state.ctx
    return Node(
        agent_id=ctx.agent_id, parent_id=ctx.parent_id, depth=ctx.depth, role=state.spec.role,
        status=status, usage=state.usage,
    )
