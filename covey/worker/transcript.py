"""What an agent's step adds to its transcript (``covey.store.transcripts``).

Each model call and tool call becomes an event kept on the agent's state until
the next store write of its step carries it (``take``): no round trip of its
own. Events are rebuilt the same on a redelivered step (its calls replay their
settled records), so the store's skip of a key it holds is all that keeps them
single. Every text is redacted and every secret this worker holds (its signing
secret, its model keys) is masked before it is kept.
"""

from __future__ import annotations

import hashlib
import json
import time
from datetime import datetime
from typing import Any

from covey import keys
from covey.models.replies import ToolCall
from covey.orchestration.actions import CallModel
from covey.parts import shown
from covey.store.transcripts import Entries, ModelCallEvent, ToolCallEvent, entry_key
from covey.tools.policy import capped
from covey.worker.agent_state import AgentState
from covey.worker.deps import Deps
from covey.worker.redaction import clean, suspect
from covey.worker.replay import CallRecord

# A tool's result is in full in the messages the next call sends; its event keeps
# the start of it, so a long result does not take the transcript's cap twice.
TOOL_RESULT_BYTES = 2048
ERROR_PREFIX = "error: "  # how a tool call's text reports a failure (``covey.worker.tools``)


def model_call(
    deps: Deps, state: AgentState, action: CallModel, tools: list[str], record: CallRecord, max_tokens: int
) -> None:
    """Keep the call of ``state.cycle``: the messages it added to the conversation and its outcome."""
    if not deps.settings.transcripts:
        return
    cursor, messages = state.transcript, action.messages
    # Strategies append to a conversation or start one anew: the call continues the
    # last one when the message that ended it is still in its place.
    continues = 0 < cursor.sent <= len(messages) and _digest(messages[cursor.sent - 1]) == cursor.digest
    sent = messages[cursor.sent :] if continues else messages
    if any(isinstance(m.get("content"), list) for m in sent):  # parts: each image described, never its base64
        sent = shown(sent)
    cursor.sent, cursor.digest = len(messages), _digest(messages[-1]) if messages else ""
    reply = None if record.reply is None else {k: v for k, v in record.reply.items() if v not in (None, [])}
    event = ModelCallEvent.model_construct(  # the worker's own values: nothing to validate
        cycle=state.cycle,
        sent=sent,
        continues=continues,
        model=state.spec.model,
        params=deps.llm.parameters(state.spec.model, state.spec.model_params, max_tokens),
        tools=tools,
        reply=reply,
        finish_reason=reply.get("finish_reason") if reply is not None else None,
        usage=record.usage,
        error=record.error,
        latency_ms=record.latency_ms,
        at=record.at,
        cached=record.cached,
        answered_by=record.answered_by,
    )
    _keep(state, entry_key(state.cycle), event)


def tool_call(
    deps: Deps,
    state: AgentState,
    index: int,
    call: ToolCall,
    text: str,
    at: datetime | None = None,
    latency_ms: float | None = None,
) -> None:
    """Keep the ``index``-th tool call of ``state.cycle`` and the text the model reads back."""
    if not deps.settings.transcripts:
        return
    event = ToolCallEvent.model_construct(
        cycle=state.cycle,
        call_id=call.id,
        tool=call.name,
        arguments=call.arguments,
        result=capped(text, TOOL_RESULT_BYTES, "a transcript keeps the first {} bytes; the model was sent them all"),
        error=text.startswith(ERROR_PREFIX),
        latency_ms=latency_ms,
        at=at,
    )
    _keep(state, entry_key(state.cycle, index), event)


def take(deps: Deps, state: AgentState) -> Entries | None:
    """The events not yet written, handed to the write that carries them."""
    pending = state.transcript._pending
    if not pending:
        return None
    state.transcript._pending = []
    key = keys.transcript(state.ctx.job_id, state.ctx.agent_id)
    return Entries(key=key, cap=deps.settings.transcript_bytes, fields=pending)


def elapsed_ms(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()``), to a tenth."""
    return round((time.perf_counter() - started) * 1000, 1)


def _keep(state: AgentState, key: str, event: ModelCallEvent | ToolCallEvent) -> None:
    """Hold ``event`` as the transcript keeps it: without its defaults (its key says
    its kind), for the cap's sake, and with nothing secret. Most entries hold
    nothing to mask: one look at the whole text tells, and only one that may is
    walked text by text."""
    text = event.model_dump_json(exclude_defaults=True)
    if suspect(text):
        text = json.dumps(clean(json.loads(text)), ensure_ascii=False, separators=(",", ":"))
    state.transcript._pending.append((key, text))


def _digest(message: dict[str, Any]) -> str:
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
