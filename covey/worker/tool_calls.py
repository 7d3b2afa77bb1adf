"""An agent's tool calls, each counted once and its finished result recorded.

Each call is counted on the ledger before it runs (refused past the job's
``max_tool_calls``) and its result is kept with the agent's replies once it
returns, so a redelivered step (its worker died before the ack) replays the
result instead of running the tool again. A call cut off by the crash, before
its result was kept, runs again with the same ``ToolContext.call_id``.
"""

from __future__ import annotations

import time

from covey.config import faults
from covey.models.replies import ToolCall
from covey.orchestration.actions import ToolResults
from covey.results import Usage
from covey.worker import telemetry, transcript
from covey.worker.agent_state import AgentState
from covey.worker.calls import Stop, seconds_left
from covey.worker.deps import Deps
from covey.worker.tools import run_tool


def run_tools(deps: Deps, state: AgentState, calls: list[ToolCall]) -> ToolResults | Stop:
    """Every call's text by call id, or the ``Stop`` of a call the ledger refused."""
    ctx = state.ctx
    workspace = deps.workspace(ctx.job_id)
    results: dict[str, str] = {}
    for index, call in enumerate(calls):
        # The model's call id is unique in its reply, which is itself replayed: with the cycle, unique in the job.
        rid = f"{ctx.agent_id}:{state.cycle}:tool:{call.id}"
        grant = deps.ledger.count_tool_call(ctx.job_id, ctx.chain, rid)
        if not grant.ok:
            assert grant.cause is not None and grant.reason is not None  # a refusal always says why
            telemetry.refused(grant.cause, grant.reason)
            return Stop(grant.cause, grant.reason)
        state.usage += Usage(tool_calls=1)
        if grant.record is not None:
            results[call.id] = grant.record
            transcript.tool_call(deps, state, index, call, grant.record)
            continue
        at, started = deps.now(), time.perf_counter()
        left = seconds_left(at, state.deadline, ctx.budget.deadline)
        with telemetry.tool_call(state, call) as seen:
            results[call.id] = seen(run_tool(call, ctx, workspace, left))
        transcript.tool_call(deps, state, index, call, results[call.id], at, transcript.elapsed_ms(started))
        deps.ledger.record_tool_call(ctx.job_id, ctx.agent_id, rid, results[call.id])
        faults.at("after_tool")
    return ToolResults(results)
