"""Turning a strategy's ``Spawn`` into children opened on the ledger.

A child request is typed (strategy and options, model, role, instructions, tools,
a share of the budget) and validated like any spec. Whatever it asks, a child never
has more than its parent: its tools are cut to what the parent was offered, deny
rules are inherited, and the ledger clamps its budget to what the parent has
left. Its terms are written on its ledger row, which its own task trusts over the
message that started it.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentTerms, Opened
from covey.context import CHILD_MARK, RunContext
from covey.errors import describe
from covey.orchestration.actions import ChildRequest, Spawn
from covey.results import AgentResult
from covey.spec import AGENT_STRATEGY, AgentSpec, InvalidSpec
from covey.status import AgentStatus, Cause, CauseKind, Resource
from covey.store.tree import Node, preview
from covey.tools.builtin import SPAWN_TOOLS
from covey.tools.registry import narrow, offered
from covey.worker import events
from covey.worker.agent_state import AgentState, PendingChild
from covey.worker.deps import Deps


def child_agent_id(parent_id: str, spawn_round: int, index: int) -> str:
    """Deterministic, so a redelivered parent step re-opens the same children."""
    digest = hashlib.sha1(f"{parent_id}/{spawn_round}/{index}".encode()).hexdigest()[:8]
    return f"{parent_id}{CHILD_MARK}{digest}"


def spawn(deps: Deps, state: AgentState, action: Spawn) -> list[tuple[RunContext, AgentSpec]]:
    """Open every requested child; the refused ones are answered at once in
    ``state.pending``. Returns the children to run. A ``join="each"`` spawn adds to
    the children still running; a ``join="all"`` one may not (its join would wait
    on them too), which is the strategy's bug: ``ValueError``."""
    ctx = state.ctx
    each = action.join == "each"
    if not each and state.pending:
        raise ValueError(f"a Spawn joining all while {len(state.pending)} children of a join 'each' run")
    state.spawn_round += 1
    state.as_completed = each
    if not each:
        state.pending = []
    asked = [
        _asked(deps, state, child_agent_id(ctx.agent_id, state.spawn_round, i), r)
        for i, r in enumerate(action.children)
    ]
    # Opened in one round trip, in order: each child is clamped to what those before it left.
    to_open = [a for a in asked if not isinstance(a, AgentResult)]
    said = [events.opened(c, ctx.agent_id, ctx.depth + 1, s.role, s.task) for c, s, _, _ in to_open]
    opened = iter(deps.ledger.open_many(ctx.job_id, ctx.chain, [(c, b, t) for c, _, b, t in to_open], said))
    children, queued = [], []
    for request, ask in zip(action.children, asked):
        outcome = ask if isinstance(ask, AgentResult) else _opened(state, ask, next(opened), request.role, deps.now())
        if isinstance(outcome, AgentResult):
            state.pending.append(PendingChild(agent_id=outcome.agent_id, refused=outcome, key=request.key))
            queued.append(Node.of(outcome, task=request.task))
            continue
        children.append(outcome)
        state.pending.append(PendingChild(agent_id=outcome[0].agent_id, key=request.key))
        queued.append(
            Node(
                agent_id=outcome[0].agent_id,
                parent_id=ctx.agent_id,
                depth=outcome[0].depth,
                role=outcome[1].role,
                status=AgentStatus.QUEUED,
                task=preview(request.task),
            )
        )
    deps.tree.record(ctx.job_id, *queued)
    return children


Asked = tuple[str, AgentSpec, Budget, AgentTerms]  # a child to open: its id, spec, budget and terms


def _asked(deps: Deps, state: AgentState, child_id: str, request: ChildRequest) -> Asked | AgentResult:
    """What the child is opened with; or the result of its refusal before the ledger is asked."""
    ctx = state.ctx
    if ctx.budget.max_depth < 1:
        reason = f"spawn refused: depth cap reached (max_depth=0 at agent {ctx.agent_id})"
        cause = Cause(kind=CauseKind.BUDGET, agent_id=ctx.agent_id, resource=Resource.DEPTH)
        return unreported(ctx, child_id, cause, reason, request.role, deps.now())
    try:
        spec = child_spec(state.spec, ctx, request)
        budget = _within(ctx.budget.child(request.fraction or ctx.child_fraction), _deadline(deps, state, request))
    except ValueError as e:  # InvalidSpec included
        cause = Cause(kind=CauseKind.INVALID_SPEC)
        return unreported(ctx, child_id, cause, f"invalid child spec: {e}", request.role, deps.now())
    terms = AgentTerms(
        tools=spec.tools,
        deny=ctx.deny,
        max_cycles=spec.max_cycles,
        scopes=ctx.scopes,
        spec=spec.model_dump_json(),
        child_fraction=ctx.child_fraction,
        priority=ctx.priority,
    )
    return child_id, spec, budget, terms


def _opened(
    state: AgentState, asked: Asked, opened: Opened, role: str, now: datetime
) -> tuple[RunContext, AgentSpec] | AgentResult:
    """The child's context and spec, as the ledger opened it; or the result of its refusal."""
    child_id, spec, _, _ = asked
    if not opened.ok or opened.budget is None:
        assert opened.cause is not None and opened.reason is not None  # a refusal always says why
        return unreported(state.ctx, child_id, opened.cause, opened.reason, role, now)
    return state.ctx.child(child_id, opened.budget, allow=spec.tools), spec


def child_spec(parent: AgentSpec, ctx: RunContext, request: ChildRequest) -> AgentSpec:
    """The child's spec: what the request names, the parent's for the rest, and
    tools never beyond what the parent was offered. ``InvalidSpec`` names a bad field."""
    allowed = offered(ctx.allow, ctx.deny)
    tools = narrow(allowed, request.tools)
    if not request.can_spawn:
        tools = [name for name in tools if name not in SPAWN_TOOLS]
    own_options = request.strategy is not None or bool(request.options)
    # An agent of another framework is the request's, or its parent's where it takes the parent's strategy.
    agent = request.agent or (parent.agent if request.strategy is None else None)
    fields: dict[str, Any] = {
        "task": request.task,
        "role": request.role,
        "instructions": request.instructions,
        "model": request.model or parent.model,
        "model_params": parent.model_params,
        "strategy": request.strategy or (AGENT_STRATEGY if request.agent else parent.strategy),
        "agent": agent,
        "options": request.options if own_options else parent.options,
        "tools": tools,
        "max_cycles": min(request.max_cycles or parent.max_cycles, parent.max_cycles),
        "max_call_tokens": parent.max_call_tokens,
        "max_schema_retries": parent.max_schema_retries,
        "budget_notice": parent.budget_notice,
        "wrap_up": parent.wrap_up,
        "stream": parent.stream,
        "cache": parent.cache,
        "approve": parent.approve,
        "guardrails": parent.guardrails,
        "approval_timeout": parent.approval_timeout,
        "timeout": parent.timeout if request.timeout is None else request.timeout,
    }
    try:
        return AgentSpec.model_validate(fields)
    except ValidationError as e:
        raise InvalidSpec(describe(e)) from None


def _deadline(deps: Deps, state: AgentState, request: ChildRequest) -> datetime | None:
    """The earlier of the parent's own deadline and the request's ``timeout`` from now
    (the job's deadline is in the budget already): time in the queue counts."""
    own = None if request.timeout is None else deps.now() + timedelta(seconds=request.timeout)
    return min((d for d in (state.deadline, own) if d is not None), default=None)


def _within(budget: Budget, deadline: datetime | None) -> Budget:
    """A child's budget ends no later than ``deadline``."""
    if deadline is None or (budget.deadline is not None and budget.deadline <= deadline):
        return budget
    return budget.model_copy(update={"deadline": deadline})


def unreported(
    ctx: RunContext, child_id: str, cause: Cause, error: str, role: str = "agent", at: datetime | None = None
) -> AgentResult:
    """The result of a child that never reported one: refused at open, or lost from the join."""
    node = Node(
        agent_id=child_id,
        parent_id=ctx.agent_id,
        role=role,
        depth=ctx.depth + 1,
        status=cause.kind.status,
        error=error,
        cause=cause,
        started_at=at,
        finished_at=at,
    )
    return node.result(ctx.job_id)
