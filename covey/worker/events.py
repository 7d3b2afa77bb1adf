"""The events a worker's step reports beside its node's moves (``covey.events``):
an agent opened, a model call reserved and settled, a tool call counted and its
result kept. Each is handed, as JSON, to the ledger script that writes what it
reports, which appends it only when it writes (so never twice). Texts are cut to
a preview and their secrets masked, as in a transcript."""

from __future__ import annotations

from covey.events import EventType, JobEvent, preview
from covey.models.replies import ToolCall
from covey.worker.agent_state import AgentState
from covey.worker.redaction import redact
from covey.worker.replay import CallRecord
from covey.worker.transcript import ERROR_PREFIX


def opened(agent_id: str, parent_id: str | None, depth: int, role: str, task: str) -> str:
    return JobEvent(
        type=EventType.AGENT_OPENED,
        agent_id=agent_id,
        parent_id=parent_id,
        depth=depth,
        role=role,
        task=preview(redact(task)),
    ).dumps()


def model_started(state: AgentState, call_id: str) -> str:
    """The script adds the tokens it reserved."""
    ctx = state.ctx
    return JobEvent(
        type=EventType.MODEL_STARTED, agent_id=ctx.agent_id, call_id=call_id, cycle=state.cycle, model=state.spec.model
    ).dumps()


def model_finished(state: AgentState, call_id: str, record: CallRecord) -> str:
    reply = record.reply or {}
    return JobEvent(
        type=EventType.MODEL_FINISHED,
        agent_id=state.ctx.agent_id,
        call_id=call_id,
        cycle=state.cycle,
        usage=record.usage,
        finish_reason=reply.get("finish_reason"),
        error=record.error,
        latency_ms=record.latency_ms,
    ).dumps()


def tool_started(state: AgentState, call_id: str, call: ToolCall) -> str:
    return JobEvent(
        type=EventType.TOOL_STARTED,
        agent_id=state.ctx.agent_id,
        call_id=call_id,
        cycle=state.cycle,
        tool=call.name,
        arguments=preview(redact(call.arguments)),
    ).dumps()


def tool_finished(state: AgentState, call_id: str, call: ToolCall, text: str, latency_ms: float) -> str:
    failed = text.startswith(ERROR_PREFIX)
    return JobEvent(
        type=EventType.TOOL_FINISHED,
        agent_id=state.ctx.agent_id,
        call_id=call_id,
        cycle=state.cycle,
        tool=call.name,
        result=None if failed else preview(redact(text)),
        error=preview(redact(text)) if failed else None,
        latency_ms=latency_ms,
    ).dumps()
