"""The one generic loop that interprets a strategy's Actions.

It runs an agent until it finishes or asks for children. Before every step it
checks cancel and deadlines; model calls go through ``calls`` (reserve, call or
replay, settle, check the reply) and spawns through ``spawning``. A fan-out is
returned to the task, which checkpoints with the children's messages and sends
them, so no worker slot waits on children.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentRow
from covey.budgets.scopes import GLOBAL
from covey.config.priorities import LEAST_URGENT
from covey.context import DEFAULT_CHILD_FRACTION, SUBAGENT_DIR, RunContext
from covey.orchestration import registry
from covey.orchestration.actions import (
    Action,
    CallModel,
    Cancel,
    ChildResults,
    Finish,
    RunTools,
    Spawn,
    from_json,
)
from covey.redis_scripts import ScriptCall
from covey.results import AgentResult, ChildSummary, Usage
from covey.spec import AgentSpec
from covey.status import AgentStatus, Cause, CauseKind
from covey.store import join as joins
from covey.tools.registry import narrow
from covey.worker import ending, guards, slots, telemetry, transcript
from covey.worker.agent_state import AgentState, Phase
from covey.worker.approvals import Park
from covey.worker.calls import Stop, call_model, seconds_left, settle_owed
from covey.worker.completion import Completion, taken_over
from covey.worker.deps import Deps
from covey.worker.logs import agent_event
from covey.worker.redaction import clean
from covey.worker.slots import Hop
from covey.worker.spawning import spawn, unreported
from covey.worker.tool_calls import run_tools
from covey.worker.wrap_up import WrappedUp

# An ending agent's final node, as its record holds it, and its result -> script
# calls run in its final record's round trip.
EndCalls = Callable[[str, AgentResult], Sequence[ScriptCall]]


@dataclass(frozen=True)
class Finished:
    """The agent ended; ``resume`` is its parent's resume message (as stored) when it
    was the last child its parent waited on: the task sends it."""

    result: AgentResult
    resume: str | None = None
    ended_with: bool = False  # whether the ``end`` calls ran with its final record (it wrote it)


@dataclass(frozen=True)
class FanOut:
    state: AgentState
    children: list[tuple[RunContext, AgentSpec]]


@dataclass(frozen=True)
class Paused:
    """The task's slice is over, or the agent must wait (``hop``: for a scope's running
    cap or window; ``approvals``: for a person's decision on those tool calls)
    without holding its worker slot: checkpoint, and take ``action`` in a new task,
    sent after the hop's countdown, or once a decision comes."""

    state: AgentState
    action: Action
    hop: Hop | None = None
    approvals: list[str] = field(default_factory=list)


def begin(
    deps: Deps, ctx: RunContext, spec: AgentSpec, task_id: str | None = None, row: AgentRow | None = None
) -> tuple[AgentState, Action] | Completion:
    """Start an agent its message describes (a job's root, from its spec; a child's
    message of the previous format) under the terms its ledger row holds (``row``,
    when the caller has just read it), whatever its message says."""
    row = row or deps.ledger.agent(ctx.job_id, ctx.agent_id)
    if row is None:
        return _never_opened(ctx.job_id, ctx.agent_id)
    placed = _placed(ctx.job_id, ctx.agent_id, row, ctx.allow, ctx.deny, ctx.scopes, ctx.child_fraction, ctx.priority)
    return _started(deps, placed, _capped(spec, row), task_id)


def begin_opened(
    deps: Deps, job_id: str, agent_id: str, row: AgentRow | None, task_id: str | None = None
) -> tuple[AgentState, Action] | Completion:
    """Start a child as its parent opened it: its spec and its terms are its ledger
    row's (its message names only the agent)."""
    if row is None or row.spec is None:
        return _never_opened(job_id, agent_id)
    spec = AgentSpec.model_validate_json(row.spec)
    fraction = row.child_fraction if row.child_fraction is not None else DEFAULT_CHILD_FRACTION
    ctx = _placed(job_id, agent_id, row, None, [], [GLOBAL], fraction, LEAST_URGENT)
    return _started(deps, ctx, _capped(spec, row), task_id)


def _never_opened(job_id: str, agent_id: str) -> Completion:
    """A task for an agent its job's ledger never opened (a forged or stray message):
    dropped, with nothing written, not even a result under its task id, which may be
    another job's."""
    return Completion.drop(
        f"refused a task for agent {agent_id} of job {job_id}: "
        f"agent {agent_id} was never opened on the ledger of job {job_id}",
        logging.WARNING,
    )


def _started(deps: Deps, ctx: RunContext, spec: AgentSpec, task_id: str | None) -> tuple[AgentState, Action]:
    action = registry.strategy(spec.strategy).start(spec, ctx)
    now = deps.now()
    state = AgentState(
        ctx=ctx,
        spec=spec,
        strategy_state=action.state,
        started_at=telemetry.started(now),
        task_id=task_id,
        deadline=now + timedelta(seconds=spec.timeout) if spec.timeout else None,
        task_deadline=_task_deadline(deps),
    )
    agent_event("started", state, AgentStatus.RUNNING)
    return state, action


def _placed(
    job_id: str,
    agent_id: str,
    row: AgentRow,
    allow: list[str] | None,
    deny: list[str],
    scopes: list[str],
    child_fraction: float,
    priority: int,
) -> RunContext:
    """The agent's context as its row holds it: its tools (within ``allow``), deny
    rules (with ``deny``), caps, depth, scopes and priority (``scopes`` and ``priority``
    where the row keeps none), and its place in the tree (ancestors, parent, workspace folder), which
    the agent's id keys and no message can move."""
    return RunContext(
        job_id=job_id,
        agent_id=agent_id,
        parent_id=row.ancestors[-1] if row.ancestors else None,
        depth=row.depth,
        ancestors=row.ancestors,
        budget=Budget(
            max_tokens=row.tokens_limit,
            max_cycles=row.cycles_limit,
            max_agents=row.agents_limit,
            max_depth=row.depth_limit,
            deadline=row.deadline,
        ),
        deny=sorted({*deny, *row.deny}),
        allow=narrow(allow, row.tools),
        subroot=f"{SUBAGENT_DIR}/{agent_id}" if row.ancestors else "",
        scopes=scopes if row.scopes is None else row.scopes,
        child_fraction=child_fraction,
        priority=priority if row.priority is None else row.priority,
    )


def _capped(spec: AgentSpec, row: AgentRow) -> AgentSpec:
    """The spec with no more model calls of its own than its row allows."""
    if row.agent_cycles_limit is not None and row.agent_cycles_limit < spec.max_cycles:
        return spec.model_copy(update={"max_cycles": row.agent_cycles_limit})
    return spec


def _task_deadline(deps: Deps) -> datetime:
    """When the running task's slice ends: no task outlives the broker's patience
    (its visibility timeout), however long its agent lives."""
    return deps.now() + timedelta(seconds=deps.settings.slice_seconds)


def proceed(deps: Deps, state: AgentState) -> tuple[AgentState, Action]:
    """Take up a paused agent in a new task, with the Action it was about to take."""
    if state.next_action is None:
        raise ValueError(f"agent {state.ctx.agent_id} was not paused")
    action = from_json(state.next_action, state.strategy_state)
    state.next_action, state.phase = None, Phase.RUNNING
    state.task_deadline = _task_deadline(deps)
    return state, action


def join(deps: Deps, state: AgentState) -> tuple[AgentState, Action] | Completion:
    """Fold finished children back in, in the order the strategy asked for them:
    every child of a ``join="all"`` spawn; of ``join="each"`` ones, those the
    expected resume hands over (its batch) and any refused at open.

    Each child's result is what its own node recorded when it finished, never what
    the message that resumes this agent says. A child whose node is not final has
    not reported: the message asking for the join is not its last child's, and is
    dropped; nothing is made up for it. Only a child whose node is gone (its
    records wiped) is joined as lost."""
    batch = joins.batch(deps.redis, state.ctx.job_id, state.ctx.agent_id) if state.as_completed else None
    return _fold(deps, state, batch)


def _fold(deps: Deps, state: AgentState, batch: set[str] | None) -> tuple[AgentState, Action] | Completion:
    """Resume the strategy with the pending children ``batch`` names and those
    refused at open (``batch`` None: every pending child)."""
    state.task_deadline = _task_deadline(deps)
    ctx = state.ctx
    taken = [p for p in state.pending if batch is None or p.refused is not None or p.agent_id in batch]
    running = [p.agent_id for p in taken if p.refused is None]
    found = {n.agent_id: n for n in deps.tree.many(ctx.job_id, running)}
    unfinished = [agent_id for agent_id, n in found.items() if not n.final]
    if unfinished:
        return Completion.drop(
            f"job {ctx.job_id}: agent {ctx.agent_id} resumed before its children {', '.join(unfinished)} "
            "finished; dropped",
            logging.WARNING,
        )
    finished = {agent_id: n.result(ctx.job_id) for agent_id, n in found.items()}
    ordered = []
    for pending in taken:
        result = (
            pending.refused
            or finished.get(pending.agent_id)
            or unreported(ctx, pending.agent_id, Cause(kind=CauseKind.STATE_LOST), "child result missing from the join")
        )
        if pending.refused is None:
            state.usage += result.usage + Usage(agents=1)
        ordered.append(result)
    state.children += [r.summary() for r in ordered]
    state.pending = [p for p in state.pending if p not in taken]
    state.phase = Phase.RUNNING
    state.recorded_at = None  # its node says waiting: its step records it running again
    agent_event("resumed", state, AgentStatus.RUNNING)
    strategy = registry.strategy(state.spec.strategy)
    outcome = ChildResults(ordered, [p.key for p in taken], {p.agent_id: p.key for p in state.pending})
    action = strategy.resume(state.spec, state.ctx, state.strategy_state, outcome)
    return state, action


def advance(
    deps: Deps,
    state: AgentState,
    action: Action,
    holder: str = "",
    end: EndCalls | None = None,
    taken: str | None = None,
) -> Finished | FanOut | Paused | Completion:
    """Run the agent from ``action`` until it ends, fans out or pauses. Its task
    (the run ``holder`` of its step, which took up the expected message ``taken``)
    gives back the running slots this takes (``slots.give_back``) when it returns.
    A copy of the step that another ran meanwhile, or whose delivery another worker
    took from this quiet one, goes no further: a dropping ``Completion``. ``end``
    gives script calls to run in the round trip of its final record."""
    strategy = registry.strategy(state.spec.strategy)
    # An agent's first step, and its first after a join, records it running with its
    # slot take: a round trip less.
    first = state.recorded_at is None
    wait = slots.take(deps, state, holder, state.node(AgentStatus.RUNNING) if first else None, taken)
    if isinstance(wait, Completion):
        return wait
    if first:
        state.recorded_at = deps.now()
    if wait is not None and _stop(deps, state, checked_at_reserve=False) is None:
        return _waits(state, action, wait)
    if state.waiting_for is not None:  # its wait is over: it runs again
        state.waiting_for, state.phase = None, Phase.RUNNING
        deps.tree.record(state.ctx.job_id, state.node(AgentStatus.RUNNING))
    if state.step == 0 and state.cycle == 0 and (tripped := guards.on_input(state)) is not None:
        return _stopped(deps, state, tripped, end)
    while True:
        if not isinstance(action, Finish):  # an end carries the last call's settlement; all else settles it first
            settle_owed(deps, state)
        if not deps.still_held():  # a step taken by another worker while this one was quiet goes no further
            return taken_over(state.ctx.job_id, state.ctx.agent_id)
        state.strategy_state = action.state
        if isinstance(action, Finish):
            if action.status is AgentStatus.COMPLETED and (tripped := guards.on_output(state, action.output)):
                return _stopped(deps, state, tripped, end)
            cause = action.cause or _strategy_cause(action.status, state.children)
            return _finish(deps, state, action.status, action.output, action.error, cause, action.data, end)
        stop = _stop(deps, state, checked_at_reserve=isinstance(action, CallModel))
        if stop is not None:
            return _stopped(deps, state, stop, end)
        if state.task_deadline is not None and deps.now() >= state.task_deadline:
            state.phase = Phase.PAUSED
            agent_event("paused", state, AgentStatus.RUNNING)
            return Paused(state, action)
        if isinstance(action, CallModel):
            outcome: Any = call_model(deps, state, action, _seconds_left(deps, state))
            if isinstance(outcome, Completion):
                return outcome
            if isinstance(outcome, Hop):
                return _waits(state, action, outcome)
            if isinstance(outcome, Stop):
                # A call cut short by a deadline is the deadline's doing, not the model's.
                stop = (outcome.status is AgentStatus.FAILED and _deadline(deps, state)) or outcome
                return _stopped(deps, state, stop, end)
            late = _deadline(deps, state)
            if late is not None:  # the reply came after a deadline: not an answer in time
                return _stopped(deps, state, Stop(late.cause, f"{late.reason} during a model call"), end)
            if isinstance(outcome, WrappedUp):  # the budget ran out: its last reply is its answer
                answer, cause = outcome.reply.content or "", outcome.cause
                action = Finish(state.strategy_state, AgentStatus.COMPLETED, answer, cause=cause, data=outcome.data)
                continue
        elif isinstance(action, RunTools):
            outcome = run_tools(deps, state, action.calls)
            if isinstance(outcome, Completion):
                return outcome
            if isinstance(outcome, Stop):
                return _stopped(deps, state, outcome, end)
            if isinstance(outcome, Park):
                state.waiting_for, state.phase = outcome.wait, Phase.AWAITING_APPROVAL
                agent_event("waiting", state, AgentStatus.WAITING)
                return Paused(state, action, approvals=outcome.calls)
        elif isinstance(action, Spawn | Cancel):
            children = spawn(deps, state, action) if isinstance(action, Spawn) else _cancel(deps, state, action)
            if any(p.refused is None for p in state.pending):  # it waits on some
                state.phase = Phase.AWAITING_CHILDREN
                agent_event(f"spawned {len(children)}" if children else "waiting", state, AgentStatus.WAITING)
                return FanOut(state=state, children=children)
            folded = _fold(deps, state, None)  # every child refused at open: nothing is unfinished
            if isinstance(folded, Completion):
                return folded
            state, action = folded
            continue
        else:
            raise TypeError(f"unknown action {type(action).__name__}")
        agent_event("model call" if isinstance(action, CallModel) else "tools", state, AgentStatus.RUNNING)
        action = strategy.resume(state.spec, state.ctx, state.strategy_state, outcome)


def _waits(state: AgentState, action: Action, hop: Hop) -> Paused:
    state.waiting_for, state.phase = hop.wait, Phase.AWAITING_SLOT
    agent_event("waiting", state, AgentStatus.WAITING)
    return Paused(state, action, hop)


def _stop(deps: Deps, state: AgentState, checked_at_reserve: bool) -> Stop | None:
    """Why the agent must end before its next step, if it must. Cycle and token
    caps are the ledger's to refuse at the reservation, and so are the job's cancel
    and its parent's before a model call (``checked_at_reserve``): a round trip
    fewer per call."""
    ctx = state.ctx
    if checked_at_reserve:
        return _deadline(deps, state)
    stopped = deps.cancels.stopped(ctx.job_id, ctx.chain)
    if stopped is not None:
        return Stop.of(CauseKind.CANCELLED, stopped)
    return _deadline(deps, state)


def _cancel(deps: Deps, state: AgentState, action: Cancel) -> list[tuple[RunContext, AgentSpec]]:
    """Mark the strategy's running children it names; it opens none."""
    running = {p.agent_id for p in state.pending if p.refused is None}
    deps.cancels.cancel_agents(state.ctx.job_id, [a for a in action.agent_ids if a in running])
    return []


def _deadline(deps: Deps, state: AgentState) -> Stop | None:
    """The deadline that has passed, if one has: the job's or the agent's."""
    ctx, now = state.ctx, deps.now()
    if ctx.budget.expired(now):  # a child's holds its parent's deadline and its own timeout too
        return Stop.of(CauseKind.DEADLINE, "deadline passed" if ctx.ancestors else "job deadline passed")
    if state.deadline is not None and now >= state.deadline:
        return Stop.of(CauseKind.DEADLINE, f"agent timeout of {state.spec.timeout}s passed")
    return None


def _seconds_left(deps: Deps, state: AgentState) -> float | None:
    return seconds_left(deps.now(), state.deadline, state.ctx.budget.deadline)


def _strategy_cause(status: AgentStatus, children: list[ChildSummary]) -> Cause | None:
    """The cause of a strategy's ``Finish`` that names none. A strategy ends
    ``budget_exceeded``, ``timed_out`` or ``cancelled`` when a child did: the
    latest such child's cause is its own, so a sweep learns its scope ran dry
    however deep the refusal. ``failed`` is the strategy giving up."""
    if status is AgentStatus.COMPLETED:
        return None
    if status is AgentStatus.FAILED:
        return Cause(kind=CauseKind.GAVE_UP)
    inherited = next((c.cause for c in reversed(children) if c.cause is not None and c.status is status), None)
    return inherited or Cause(kind=next(kind for kind in CauseKind if kind.status is status))


def _stopped(deps: Deps, state: AgentState, stop: Stop, end: EndCalls | None) -> Finished:
    return _finish(deps, state, stop.status, None, stop.reason, stop.cause, end=end)


def _finish(
    deps: Deps,
    state: AgentState,
    status: AgentStatus,
    output: str | None,
    error: str | None,
    cause: Cause | None,
    data: Any = None,
    end: EndCalls | None = None,
) -> Finished:
    """Record the agent's result and drop what it kept only while running (``covey.worker.ending``)."""
    ctx = state.ctx
    # A provider's error may echo a key, a model repeat one a tool gave it.
    output, error, data = clean(output), clean(error), clean(data)
    node = state.node(status).model_copy(
        update={"output": output, "error": error, "cause": cause, "data": data, "finished_at": deps.now()}
    )
    result = node.result(ctx.job_id, state.children)
    also = None if end is None else (lambda record: end(record, result))
    entries = transcript.take(deps, state)
    ended = ending.end(deps, ctx.job_id, node, state, entries, also=also, settling=state._unsettled)
    # Settled now. A step that fails before this settles it on its way out
    # (covey.worker.step.run); one handed back in a Redis outage, in its rerun.
    state._unsettled, state.phase = None, Phase.FINISHED
    if ended.written:
        telemetry.finished(state, ended.node)
    else:
        result = ended.node.result(ctx.job_id, state.children)
    agent_event("finished", state, status)
    return Finished(result, ended.resume, ended_with=ended.written and end is not None)
