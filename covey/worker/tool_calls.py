"""An agent's tool calls, each counted once and its finished result recorded.

Each call is counted on the ledger before it runs (refused past the job's
``max_tool_calls``) and its result is kept with the agent's replies once it
returns, so a redelivered step (its worker died before the ack) replays the
result instead of running the tool again. A call cut off by the crash, before
its result was kept, runs again with the same ``ToolContext.call_id``.

Calls that need a person's approval wait for it before any call of their reply
runs (``covey.worker.approvals``); a denied one never runs.

The calls of one reply run at once, each in a thread of its own (a model that
asks for three tools of 2 s each waits 2 s, not 6), and each result is kept as
it comes; a reply of one call runs it in the step's own thread.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from datetime import datetime, timedelta

from covey.config import faults
from covey.models.replies import ToolCall
from covey.orchestration.actions import ToolResults
from covey.results import Usage
from covey.store.workspace import Workspace
from covey.worker import approvals, attachments, events, guards, telemetry, transcript
from covey.worker.agent_state import AgentState
from covey.worker.approvals import Park
from covey.worker.calls import Stop, seconds_left
from covey.worker.completion import Completion, taken_over
from covey.worker.deps import Deps
from covey.worker.tools import brought, run_tool

Ran = tuple[str, datetime, float]  # a call's text, when it started, and its milliseconds
Todo = tuple[int, ToolCall, str]  # a call's place in its reply, the call, its reservation id


def run_tools(deps: Deps, state: AgentState, calls: list[ToolCall]) -> ToolResults | Stop | Park | Completion:
    """Every call's text by call id, or the ``Stop`` of a call the ledger or a
    guardrail refused (the calls counted before it run first), or the ``Park`` of
    an agent whose calls wait for a person's approval (``covey.worker.approvals``):
    none has run; a dropping ``Completion`` when another worker took the step
    before its calls ran."""
    ctx = state.ctx
    # The model's call id is unique in its reply, which is itself replayed: with the cycle, unique in the job.
    ids = [(call, f"{ctx.agent_id}:{state.cycle}:tool:{call.id}") for call in calls]
    refused = approvals.gate(deps, state, ids)
    if isinstance(refused, Park):
        return refused
    results: dict[str, str] = {}
    ran: dict[str, tuple[datetime, datetime]] = {}
    todo: list[Todo] = []
    stop: Stop | None = None
    for index, (call, rid) in enumerate(ids):
        checked = refused.get(call.id) or guards.on_call(state, call)
        if isinstance(checked, Stop):
            stop = checked
            break
        if checked is not None:  # denied, never decided, or stopped by a guardrail: the model reads why
            results[call.id] = checked
            transcript.tool_call(deps, state, index, call, checked)
            continue
        grant = deps.ledger.count_tool_call(ctx.job_id, ctx.chain, rid, events.tool_started(state, rid, call))
        if not grant.ok:
            assert grant.cause is not None and grant.reason is not None  # a refusal always says why
            telemetry.refused(grant.cause, grant.reason)
            stop = Stop(grant.cause, grant.reason)
            break
        state.usage += Usage(tool_calls=1)
        if grant.record is not None:
            results[call.id] = grant.record
            transcript.tool_call(deps, state, index, call, grant.record)
        else:
            todo.append((index, call, rid))
    if todo and not deps.still_held():
        # Stopped past its heartbeat since the step's own check (a paused process): the
        # worker that took the step runs these calls, counted once by their ids; not both.
        return taken_over(ctx.job_id, ctx.agent_id)
    workspace = deps.workspace(ctx.job_id)
    for index, call, rid, (text, at, ms) in _ran(deps, state, workspace, todo):
        checked = guards.on_result(state, call, text)
        if isinstance(checked, Stop):
            stop = stop or checked
        elif checked is not None:  # the model reads the guardrail's reason, and so does a replay
            text = checked
        results[call.id] = text
        ran[call.id] = (at, at + timedelta(milliseconds=ms))
        transcript.tool_call(deps, state, index, call, text, at, ms)
        deps.ledger.record_tool_call(
            ctx.job_id, ctx.agent_id, rid, text, events.tool_finished(state, rid, call, text, ms)
        )
        faults.at("after_tool")
    images = attachments.shown(results, workspace)
    return stop or ToolResults(results, ran, attachments.message(images) if images else None)


def _ran(
    deps: Deps, state: AgentState, workspace: Workspace, todo: list[Todo]
) -> Iterator[tuple[int, ToolCall, str, Ran]]:
    """Each call run, as it returns: at once in threads, each with the step's context
    (its trace span), or in this thread for a single call."""
    if len(todo) <= 1:
        for index, call, rid in todo:
            yield index, call, rid, _run(deps, state, workspace, call)
        return
    with ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="covey-tool") as pool:
        running: dict[Future[Ran], Todo] = {
            pool.submit(contextvars.copy_context().run, _run, deps, state, workspace, call): (index, call, rid)
            for index, call, rid in todo
        }
        for done in as_completed(running):
            index, call, rid = running[done]
            yield index, call, rid, done.result()


def _run(deps: Deps, state: AgentState, workspace: Workspace, call: ToolCall) -> Ran:
    """One call: its text, when it started, and how many milliseconds it took."""
    at, started = deps.now(), time.perf_counter()
    left = seconds_left(at, state.deadline, state.ctx.budget.deadline)
    with telemetry.tool_call(state, call) as seen:
        text = seen(run_tool(call, state.ctx, workspace, left, brought(state.spec)))
    return text, at, transcript.elapsed_ms(started)
