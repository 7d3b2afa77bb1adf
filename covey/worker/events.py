"""The events a worker's step reports beside its node's moves (``covey.events``):
an agent opened, a model call reserved and settled, a tool call counted and its
result kept. Each is handed, as JSON, to the ledger script that writes what it
reports, which appends it only when it writes (so never twice). Texts are cut to
a preview and their secrets masked, as in a transcript."""

from __future__ import annotations

from typing import Any

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
    return _of_call(state, EventType.MODEL_STARTED, call_id, model=state.spec.model)


def model_finished(state: AgentState, call_id: str, record: CallRecord) -> str:
    reply = record.reply or {}
    return _of_call(
        state,
        EventType.MODEL_FINISHED,
        call_id,
        usage=record.usage,
        finish_reason=reply.get("finish_reason"),
        error=record.error,
        latency_ms=record.latency_ms,
        cached=record.cached or None,
        model=record.answered_by,
    )


def tool_started(state: AgentState, call_id: str, call: ToolCall) -> str:
    return _of_call(state, EventType.TOOL_STARTED, call_id, tool=call.name, arguments=preview(redact(call.arguments)))


def tool_finished(state: AgentState, call_id: str, call: ToolCall, text: str, latency_ms: float) -> str:
    shown = preview(redact(text))
    failed = text.startswith(ERROR_PREFIX)
    return _of_call(
        state,
        EventType.TOOL_FINISHED,
        call_id,
        tool=call.name,
        result=None if failed else shown,
        error=shown if failed else None,
        latency_ms=latency_ms,
    )


def _of_call(state: AgentState, kind: EventType, call_id: str, **fields: Any) -> str:
    """An event of the agent's call ``call_id``, of its current cycle."""
    return JobEvent(type=kind, agent_id=state.ctx.agent_id, call_id=call_id, cycle=state.cycle, **fields).dumps()
