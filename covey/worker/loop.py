"""The one generic loop that interprets a strategy's Actions.

It runs an agent until it finishes or asks for children. Before every step it
checks cancel and deadlines; model calls go through ``calls`` (reserve, call or
replay, settle, check the reply) and spawns through ``spawning``. A fan-out is
returned to the task, which checkpoints and replaces itself with a chord, so no
worker slot waits on children.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentRow
from covey.context import RunContext
from covey.orchestration import registry
from covey.orchestration.actions import Action, CallModel, ChildResults, Finish, RunTools, Spawn, ToolResults
from covey.results import AgentResult, Status, Usage
from covey.spec import AgentSpec
from covey.store.tree import RUNNING, Node
from covey.worker.agent_state import AgentState
from covey.worker.calls import Stop, call_model, seconds_left
from covey.worker.deps import Deps
from covey.worker.spawning import spawn, unreported
from covey.worker.tools import run_tool


class NotOpened(Exception):
    """A task for an agent its job's ledger never opened: a forged or stray message."""


@dataclass(frozen=True)
class Finished:
    result: AgentResult


@dataclass(frozen=True)
class FanOut:
    state: AgentState
    children: list[tuple[RunContext, AgentSpec]]


def begin(deps: Deps, ctx: RunContext, spec: AgentSpec, task_id: str | None = None) -> tuple[AgentState, Action]:
    """Start an agent under the terms its ledger row holds, whatever its message says."""
    row = deps.ledger.agent(ctx.job_id, ctx.agent_id)
    if row is None:
        raise NotOpened(f"agent {ctx.agent_id} was never opened on the ledger of job {ctx.job_id}")
    ctx, spec = _under_terms(ctx, spec, row)
    now = deps.now()
    state = AgentState(
        ctx=ctx,
        spec=spec,
        started_at=now,
        task_id=task_id,
        deadline=now + timedelta(seconds=spec.timeout) if spec.timeout else None,
        task_deadline=_task_deadline(deps),
    )
    deps.tree.record(ctx.job_id, state.node(RUNNING))
    return state, registry.strategy(spec.strategy).start(spec, ctx)


def _under_terms(ctx: RunContext, spec: AgentSpec, row: AgentRow) -> tuple[RunContext, AgentSpec]:
    """The context and spec cut to the row: its tools, deny rules, caps and depth."""
    asked = row.tools if ctx.allow is None else ctx.allow
    allow = asked if row.tools is None else [t for t in asked if t in row.tools]
    budget = Budget(
        max_tokens=row.tokens_limit, max_cycles=row.cycles_limit, max_agents=row.agents_limit,
        max_depth=row.depth_limit, deadline=row.deadline,
    )
    deny = sorted({*ctx.deny, *row.deny})
    ctx = ctx.model_copy(update={"allow": allow, "deny": deny, "budget": budget, "depth": row.depth})
    if row.agent_cycles_limit is not None and row.agent_cycles_limit < spec.max_cycles:
        spec = spec.model_copy(update={"max_cycles": row.agent_cycles_limit})
    return ctx, spec


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
            or unreported(state.ctx, pending.agent_id, Status.FAILED, "child result missing from the join")
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
            return _finish(deps, state, action.status, action.output, action.error, action.data)
        stop = _stop(deps, state)
        if stop is not None:
            return _finish(deps, state, stop.status, None, stop.reason)
        if isinstance(action, CallModel):
            outcome: Any = call_model(deps, state, action, _seconds_left(deps, state))
            if isinstance(outcome, Stop):
                # A call cut short by a deadline is the deadline's doing, not the model's.
                stop = (outcome.status is Status.FAILED and _stop(deps, state)) or outcome
                return _finish(deps, state, stop.status, None, stop.reason)
        elif isinstance(action, RunTools):
            workspace = deps.workspace(state.ctx.job_id)
            outcome = ToolResults({c.id: run_tool(c, state.ctx, workspace) for c in action.calls})
        elif isinstance(action, Spawn):
            children = spawn(deps, state, action)
            if children:
                return FanOut(state=state, children=children)
            state, action = join(deps, state, [])
            continue
        else:
            raise TypeError(f"unknown action {type(action).__name__}")
        action = strategy.resume(state.spec, state.ctx, state.strategy, outcome)


def _stop(deps: Deps, state: AgentState) -> Stop | None:
    """Why the agent must end before its next step, if it must. Cycle and token
    caps are the ledger's to refuse, at the reservation."""
    ctx, now = state.ctx, deps.now()
    if deps.ledger.cancelled(ctx.job_id):
        return Stop(Status.CANCELLED, "job cancelled")
    if ctx.budget.expired(now):
        return Stop(Status.TIMED_OUT, "job deadline passed")
    if state.deadline is not None and now >= state.deadline:
        return Stop(Status.TIMED_OUT, f"agent timeout of {state.spec.timeout}s passed")
    if state.task_deadline is not None and now >= state.task_deadline:
        seconds = deps.settings.max_agent_seconds
        return Stop(Status.TIMED_OUT, f"agent task ran past COVEY_MAX_AGENT_SECONDS={seconds:g}")
    return None


def _seconds_left(deps: Deps, state: AgentState) -> float | None:
    return seconds_left(deps.now(), state.deadline, state.ctx.budget.deadline, state.task_deadline)


def _finish(
    deps: Deps, state: AgentState, status: Status, output: str | None, error: str | None, data: Any = None
) -> Finished:
    """Record the agent's result and drop what it kept only while running."""
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
        data=data,
        usage=state.usage,
        started_at=state.started_at,
        finished_at=deps.now(),
        children=state.children,
    )
    deps.tree.record(ctx.job_id, Node.of(result, task=state.spec.task, task_id=state.task_id))
    deps.checkpoints.delete(ctx.job_id, ctx.agent_id)
    deps.ledger.finished(ctx.job_id, ctx.agent_id)
    return Finished(result)
