"""OpenTelemetry traces of a job: one trace, a span per agent, per task, per model and tool call.

Imported only when an OTLP endpoint is configured (``covey.worker.telemetry``),
so a worker without tracing never loads the SDK.

An agent's life crosses tasks and workers (it fans out, is resumed by its last
child, takes up a new slice), and an OpenTelemetry span is started and ended in
one process. So an agent's span is written once, when the agent ends, with the
start its checkpoint kept and an id derived from the job and agent ids; every
task that runs a step of it is a span under that id, made before the agent span
exists, and every child's agent span sits under its parent's. The trace id is the
job id's (a UUID is one already), unless the job's ``covey.run_job`` message
carried a W3C ``traceparent`` (a caller's own trace): then the job joins that
trace, under the caller's span. covey's own messages carry the trace id and the
receiving agent's parent span in their ``covey_trace`` header, so a worker on
another machine puts its spans where they belong.

Model calls follow the GenAI semantic conventions (``gen_ai.*``); every span
carries ``covey.job_id`` and ``covey.agent_id``, and the tenant and sweep where
the job has them. An agent's span is named by its role and id (``invoke_agent
worker (root-sub-1a2b)``), and starts when its first task's does, so no task of
it starts before it. What the spans carry of the content (the messages a call
sent and the reply, a tool's arguments and result, an agent's task and answer)
is opt-in, as the conventions ask: ``COVEY_TRACE_CONTENT=1``, redacted as
transcripts are, as ``gen_ai.input.messages``/``gen_ai.output.messages`` (tool
calls: ``gen_ai.tool.call.arguments``/``gen_ai.tool.call.result``) and as
``input.value``/``output.value``, which Arize Phoenix shows.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from covey.budgets import scopes
from covey.config.settings import get_settings
from covey.context import RunContext
from covey.models.replies import ToolCall
from covey.parts import shown
from covey.status import CauseKind
from covey.store.tree import Node
from covey.worker.agent_state import AgentState
from covey.worker.redaction import clean
from covey.worker.replay import CallRecord

HEADER = "covey_trace"  # "<trace id, 32 hex>:<span id of the receiving agent's parent, 16 hex, or empty>"
SERVICE = "covey-worker"  # the service name when OTEL_SERVICE_NAME does not give one


@dataclass(frozen=True)
class Place:
    """Where a step's agent sits in its trace."""

    trace_id: int
    agent_span: int
    parent_span: int | None  # the parent agent's span, or a caller's for a root

    def context(self, span_id: int) -> trace.Context:
        parent = SpanContext(self.trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        return trace.set_span_in_context(trace.NonRecordingSpan(parent))


_place: contextvars.ContextVar[Place | None] = contextvars.ContextVar("covey_trace_place", default=None)
_derived: contextvars.ContextVar[Place | None] = contextvars.ContextVar("covey_derived_ids", default=None)


class _Ids(RandomIdGenerator):
    """Random ids, but for the span an agent's end writes under its derived ids."""

    def generate_span_id(self) -> int:
        given = _derived.get()
        return given.agent_span if given is not None else super().generate_span_id()

    def generate_trace_id(self) -> int:  # asked only for a span without a parent: a root's
        given = _derived.get()
        return given.trace_id if given is not None else super().generate_trace_id()


def _provider() -> TracerProvider:
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the exporter OTEL_EXPORTER_OTLP_*.
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):  # neither names it
        resource = resource.merge(Resource({"service.name": SERVICE}))
    provider = TracerProvider(resource=resource, id_generator=_Ids())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


_tracer = _provider().get_tracer("covey")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_step_start: contextvars.ContextVar[int | None] = contextvars.ContextVar("covey_step_start", default=None)
_CONTENT = get_settings().trace_content  # read once, as the exporter's settings are


def trace_id(job_id: str) -> int:
    """The trace id of a job no caller's trace holds: its id's, as a UUID or hashed."""
    try:
        return uuid.UUID(job_id).int
    except ValueError:
        return int.from_bytes(hashlib.sha256(job_id.encode()).digest()[:16], "big") or 1


def span_id(job_id: str, agent_id: str) -> int:
    """An agent's span id, the same whichever worker derives it."""
    return int.from_bytes(hashlib.sha256(f"{job_id}/{agent_id}".encode()).digest()[:8], "big") or 1


def _parent_of(ctx_job: str, parent_id: str | None) -> int | None:
    return span_id(ctx_job, parent_id) if parent_id else None


def place(job_id: str, agent_id: str, parent_id: str | None, headers: dict[str, Any]) -> Place:
    """Where a task's agent sits, from its message's headers; derived when they say nothing."""
    carried = headers.get(HEADER)
    if isinstance(carried, str) and ":" in carried:
        tid, _, parent = carried.partition(":")
        try:
            return Place(int(tid, 16), span_id(job_id, agent_id), int(parent, 16) if parent else None)
        except ValueError:
            pass  # not covey's: derived below
    caller = _traceparent(headers.get("traceparent"))
    if caller is not None and parent_id is None:
        return Place(caller[0], span_id(job_id, agent_id), caller[1])
    return Place(trace_id(job_id), span_id(job_id, agent_id), _parent_of(job_id, parent_id))


def _traceparent(value: Any) -> tuple[int, int] | None:
    """A W3C ``traceparent``'s trace and span ids, if it is one."""
    parts = value.split("-") if isinstance(value, str) else []
    try:
        return (int(parts[1], 16), int(parts[2], 16)) if len(parts) == 4 else None
    except ValueError:
        return None


def headers(ctx: RunContext) -> dict[str, Any]:
    """The ``covey_trace`` header of a message the running step sends for ``ctx``'s agent:
    a child's names its parent (this agent), a resume's or proceed's this agent's own parent."""
    here = _place.get()
    if here is None:
        return {}
    own = span_id(ctx.job_id, ctx.agent_id) == here.agent_span
    parent = here.parent_span if own else here.agent_span
    return {HEADER: f"{here.trace_id:032x}:{'' if parent is None else f'{parent:016x}'}"}


def _common(ctx: RunContext) -> dict[str, Any]:
    attributes: dict[str, Any] = {"covey.job_id": ctx.job_id, "covey.agent_id": ctx.agent_id}
    for scope in ctx.scopes:
        kind = scopes.kind(scope)
        if kind != scopes.GLOBAL:
            attributes[f"covey.{kind}"] = scope.split(":", 1)[1]
    return attributes


@contextmanager
def step(task_name: str, job_id: str, agent_id: str, parent_id: str | None, headers: dict[str, Any]) -> Iterator[None]:
    """A span for one task of an agent, under the agent's span."""
    here = place(job_id, agent_id, parent_id, headers)
    started = time.time_ns()
    token, began = _place.set(here), _step_start.set(started)
    attributes = {"covey.job_id": job_id, "covey.agent_id": agent_id, "celery.task_name": task_name}
    try:
        with _tracer.start_as_current_span(
            task_name,
            context=here.context(here.agent_span),
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            start_time=started,
        ):
            yield
    finally:
        _place.reset(token)
        _step_start.reset(began)


def step_start() -> datetime | None:
    """When the running task's span started: an agent begun in it starts then too."""
    started = _step_start.get()
    return None if started is None else _EPOCH + timedelta(microseconds=started // 1000)  # floored: not after it


def _content(span: Any, kind: str, value: Any, semconv: str) -> None:
    """``value`` (redacted, as JSON) on ``span`` as the GenAI attribute ``semconv`` and
    as Phoenix's ``input.value`` / ``output.value`` (``kind``), when content is opted in;
    each image described, never its base64."""
    if not _CONTENT or value is None:
        return
    text = json.dumps(clean(shown(value)), ensure_ascii=False, default=str)
    span.set_attribute(semconv, text)
    span.set_attribute(f"{kind}.value", text)
    span.set_attribute(f"{kind}.mime_type", "application/json")  # Phoenix then shows it as JSON, not one line


@contextmanager
def model_call(state: AgentState, rid: str, replayed: bool, messages: list[dict[str, Any]]) -> Iterator[Any]:
    """A ``chat`` span of one model call (``messages``: what it sends); the caller hands it the call's record."""
    ctx, model = state.ctx, state.spec.model
    attributes = {
        **_common(ctx),
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.request.max_tokens": state.spec.max_call_tokens,
        "covey.reservation_id": rid,
        "covey.replayed": replayed,
    }
    with _tracer.start_as_current_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes) as span:
        _content(span, "input", messages, "gen_ai.input.messages")

        def seen(record: CallRecord) -> None:
            if _CONTENT and record.error is None:
                reply = record.model_reply()
                said = {
                    "role": "assistant",
                    "content": reply.content,
                    "tool_calls": [asdict(c) for c in reply.tool_calls],
                }
                _content(span, "output", [said], "gen_ai.output.messages")
            if record.usage is not None:
                span.set_attribute("gen_ai.usage.input_tokens", record.usage.prompt_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", record.usage.completion_tokens)
            if record.error is not None:
                span.set_status(Status(StatusCode.ERROR, record.error))
                span.set_attribute("error.type", record.cause.kind.value if record.cause else "model_error")
            else:
                span.set_attribute("gen_ai.response.finish_reasons", [record.model_reply().finish_reason or ""])

        yield seen


@contextmanager
def tool_call(state: AgentState, call: ToolCall) -> Iterator[Any]:
    """An ``execute_tool`` span of one tool call run in the worker."""
    attributes = {
        **_common(state.ctx),
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
    }
    with _tracer.start_as_current_span(f"execute_tool {call.name}", attributes=attributes) as span:
        _content(span, "input", call.arguments, "gen_ai.tool.call.arguments")

        def seen(text: str, outcome: str) -> str:
            _content(span, "output", text, "gen_ai.tool.call.result")
            if outcome != "ok":
                span.set_status(Status(StatusCode.ERROR, text[:200]))
            return text

        yield seen


def event(name: str, attributes: dict[str, Any]) -> None:
    """An event on the running step's innermost span (a wait, a replay)."""
    trace.get_current_span().add_event(name, attributes)


def finished(state: AgentState, node: Node) -> None:
    """Write the agent's span, now that it has ended: from its start to now, under its parent's."""
    ctx, usage = state.ctx, node.usage
    here = _place.get() or place(ctx.job_id, ctx.agent_id, ctx.parent_id, {})
    if here.parent_span is None and ctx.parent_id:  # its message came from a worker that traces nothing
        here = Place(here.trace_id, here.agent_span, span_id(ctx.job_id, ctx.parent_id))
    attributes = {
        **_common(ctx),
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": node.role,
        "gen_ai.agent.id": ctx.agent_id,
        "gen_ai.request.model": state.spec.model,
        "covey.parent_id": ctx.parent_id or "",
        "covey.depth": ctx.depth,
        "covey.status": node.status.value,
        "covey.strategy": state.spec.strategy,
        "covey.usage.prompt_tokens": usage.prompt_tokens,
        "covey.usage.completion_tokens": usage.completion_tokens,
        "covey.usage.agents": usage.agents,
    }
    # A root no caller traced has no parent: the id generator hands it the job's trace id.
    parent = (
        trace.set_span_in_context(trace.INVALID_SPAN) if here.parent_span is None else here.context(here.parent_span)
    )
    token = _derived.set(here)
    try:
        span = _tracer.start_span(
            f"invoke_agent {node.role} ({ctx.agent_id})",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_ns(state.started_at),
        )
    finally:
        _derived.reset(token)
    if node.cause is not None and node.cause.kind is CauseKind.BUDGET:
        span.add_event("covey.budget_refused", _cause(node))
    elif node.cause is not None and node.cause.kind is CauseKind.CANCELLED:
        span.add_event("covey.cancelled", _cause(node))
    if node.error:
        span.set_status(Status(StatusCode.ERROR, node.error))
    _content(span, "input", [{"role": "user", "content": state.spec.task}], "gen_ai.input.messages")
    answer = node.output if node.error is None else node.error
    _content(span, "output", [{"role": "assistant", "content": answer}], "gen_ai.output.messages")
    span.end()


def _cause(node: Node) -> dict[str, Any]:
    cause = node.cause
    assert cause is not None
    found = {"scope": cause.scope, "resource": cause.resource.value if cause.resource else None, "reason": node.error}
    return {k: v for k, v in found.items() if v is not None}


def _ns(at: datetime) -> int:
    """``at`` in nanoseconds since the epoch, exactly (a float's timestamp is off by up to a few hundred)."""
    return (at - _EPOCH) // timedelta(microseconds=1) * 1000
