"""What the worker's steps tell the outside: traces (``covey.worker.tracing``) and
metrics (``covey.worker.metrics``), each on only when configured.

Tracing is on when the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set and ``OTEL_SDK_DISABLED`` is not
``true``; metrics when ``PROMETHEUS_MULTIPROC_DIR`` is, as ``covey worker
--metrics-port`` sets it. Both are read once, when the worker process imports
this module. With neither, no SDK is imported and every hook hands back one
shared no-op: the steps pay a function call and a test, nothing more.

Each hook is one call at its place in the loop: ``step`` around a task,
``model_call`` and ``tool_call`` around a call (the ``with`` yields what the
caller hands the outcome to), ``refused`` where the ledger says no, ``started``
and ``finished`` at an agent's ends, ``headers`` on every message a step sends.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from datetime import datetime
from types import ModuleType
from typing import Any

from covey import wire
from covey.context import RunContext, parent_of
from covey.models.replies import ToolCall
from covey.status import Cause
from covey.store.tree import Node
from covey.worker.agent_state import AgentState
from covey.worker.replay import CallRecord


def _tracing_on(env: os._Environ[str] | dict[str, str]) -> bool:
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return bool(endpoint) and env.get("OTEL_SDK_DISABLED", "").strip().lower() != "true"


def _load(on: bool, name: str) -> ModuleType | None:
    return importlib.import_module(name) if on else None


_trace = _load(_tracing_on(os.environ), "covey.worker.tracing")
_metrics = _load(bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR")), "covey.worker.metrics")
_OFF = bool(_trace is None and _metrics is None)


def _ignore(value: Any, *_: Any) -> Any:
    return value


_NOTHING: AbstractContextManager[Any] = nullcontext(_ignore)


def step(task: Any, job_id: str, agent_id: str) -> AbstractContextManager[Any]:
    """Around one task of an agent: its span, and the count of steps running."""
    if _OFF:
        return _NOTHING
    return _step(task, job_id, agent_id)


@contextmanager
def _step(task: Any, job_id: str, agent_id: str) -> Iterator[None]:
    with ExitStack() as stack:
        if _trace is not None:
            request = task.request
            carried = dict(request.headers or {})
            for name in (_trace.HEADER, "traceparent"):  # Celery also keeps a message's headers as attributes
                carried.setdefault(name, getattr(request, name, None))
            # A sub-agent's first step is its parent's child span; the later ones carry theirs in the header.
            parent_id = parent_of(agent_id) if task.name == wire.AGENT else None
            stack.enter_context(_trace.step(task.name, job_id, agent_id, parent_id, carried))
        if _metrics is not None:
            _metrics.step_running(1)
            stack.callback(_metrics.step_running, -1)
        yield


def model_call(
    state: AgentState, rid: str, replayed: bool, messages: list[dict[str, Any]]
) -> AbstractContextManager[Callable[[CallRecord], Any]]:
    """Around one model call sending ``messages``; the caller hands what it yields the call's record."""
    if _OFF:
        return _NOTHING
    return _model_call(state, rid, replayed, messages)


@contextmanager
def _model_call(
    state: AgentState, rid: str, replayed: bool, messages: list[dict[str, Any]]
) -> Iterator[Callable[[CallRecord], Any]]:
    start = time.perf_counter()
    with _trace.model_call(state, rid, replayed, messages) if _trace is not None else _NOTHING as traced:

        def seen(record: CallRecord) -> CallRecord:
            traced(record)
            if _metrics is not None and not replayed:  # a replay's tokens were counted by the first call
                _metrics.model_call(state, record, time.perf_counter() - start)
            return record

        yield seen


def tool_call(state: AgentState, call: ToolCall) -> AbstractContextManager[Callable[[str], str]]:
    """Around one tool call; the caller hands what it yields the text the tool returned."""
    if _OFF:
        return _NOTHING
    return _tool_call(state, call)


@contextmanager
def _tool_call(state: AgentState, call: ToolCall) -> Iterator[Callable[[str], str]]:
    with _trace.tool_call(state, call) if _trace is not None else _NOTHING as traced:

        def seen(text: str) -> str:
            outcome = "error" if text.startswith("error:") else "ok"  # how run_tool says a call failed
            traced(text, outcome)
            if _metrics is not None:
                _metrics.tool_call(call, outcome)
            return text

        yield seen


def refused(cause: Cause | None, reason: str | None) -> None:
    """The ledger refused a reservation or a tool call."""
    if _OFF or cause is None:
        return
    if _trace is not None:
        found = {"cause": cause.kind.value, "scope": cause.scope, "resource": cause.resource, "reason": reason}
        _trace.event("covey.budget_refused", {k: str(v) for k, v in found.items() if v is not None})
    if _metrics is not None:
        _metrics.refused(cause)


def waited(seconds: float, reason: str) -> None:
    """A call waits for a scope's next per-minute window, then asks again."""
    if _trace is not None:
        _trace.event("covey.retry", {"covey.wait_seconds": seconds, "reason": reason})


def started(now: datetime) -> datetime:
    """An agent begins: counted, and when it began, which is when its task's span
    started where the task is traced (no task of it starts before it), else ``now``."""
    if _metrics is not None:
        _metrics.started()
    began = _trace.step_start() if _trace is not None else None
    return began if began is not None and began < now else now


def finished(state: AgentState, node: Node) -> None:
    """The agent ended with ``node``, its final record: its span, and the count by status."""
    if _OFF:
        return
    if _trace is not None:
        _trace.finished(state, node)
    if _metrics is not None:
        _metrics.finished(node)


def headers(ctx: RunContext) -> dict[str, Any]:
    """Options for a message a step sends for ``ctx``'s agent: the trace context it carries."""
    if _trace is None:
        return {}
    carried = _trace.headers(ctx)
    return {"headers": carried} if carried else {}
