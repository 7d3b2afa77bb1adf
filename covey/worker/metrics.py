"""Prometheus metrics of a worker's processes, served by ``covey worker --metrics-port``.

Imported only when ``PROMETHEUS_MULTIPROC_DIR`` is set (``covey.worker.telemetry``),
which ``covey worker --metrics-port`` does for every process it starts: each
process writes its samples to files in that folder, and the one HTTP endpoint
adds them up (prometheus_client's multiprocess mode), so a scrape sees the whole
worker whichever process ran a step. Counters only grow; an agent's life crosses
processes and machines, so agents in flight are ``covey_agents_started_total``
less ``covey_agents_finished_total`` summed over every worker, and the gauge here
counts the agent steps running in this worker now.
"""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess, start_http_server

from covey.budgets import scopes
from covey.models.replies import ToolCall
from covey.status import Cause
from covey.store.tree import Node
from covey.worker.agent_state import AgentState
from covey.worker.replay import CallRecord

DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"

TOKENS = Counter("covey_tokens", "Tokens the model calls spent, by model, scope and kind", ["model", "scope", "kind"])
COST = Counter("covey_cost_dollars", "What the model calls cost, where the model has prices", ["model", "scope"])
CALLS = Counter(
    "covey_model_calls", "Model calls, by model and outcome (finish reason or error cause)", ["model", "outcome"]
)
LATENCY = Histogram(
    "covey_model_call_seconds",
    "How long a model call took, retries included",
    ["model"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
STARTED = Counter("covey_agents_started", "Agents started")
FINISHED = Counter("covey_agents_finished", "Agents ended, by status", ["status"])
REFUSALS = Counter(
    "covey_refusals", "What the ledger refused, by resource and by the row short of it", ["resource", "row"]
)
TOOLS = Counter("covey_tool_calls", "Tool calls run in the worker, by tool and outcome", ["tool", "outcome"])
STEPS = Gauge("covey_agent_steps_running", "Agent steps running in this worker now", multiprocess_mode="livesum")


def model_call(state: AgentState, record: CallRecord, seconds: float) -> None:
    model = state.spec.model
    outcome = (record.cause.kind.value if record.cause else "model_error") if record.error else None
    if record.usage is not None:
        for scope in state.ctx.scopes:
            TOKENS.labels(model, scope, "prompt").inc(record.usage.prompt_tokens)
            TOKENS.labels(model, scope, "completion").inc(record.usage.completion_tokens)
            if record.usage.cost_micros:
                COST.labels(model, scope).inc(record.usage.cost_micros / 1_000_000)
        if outcome is None:
            outcome = record.model_reply().finish_reason or "unknown"
    CALLS.labels(model, outcome or "unknown").inc()
    LATENCY.labels(model).observe(seconds)


def tool_call(call: ToolCall, outcome: str) -> None:
    TOOLS.labels(call.name, outcome).inc()


def started() -> None:
    STARTED.inc()


def finished(node: Node) -> None:
    FINISHED.labels(node.status.value).inc()


def refused(cause: Cause) -> None:
    """``row``: the scope's kind (``global``, ``tenant``, ``sweep``), or ``agent`` for an agent's own row."""
    REFUSALS.labels(
        cause.resource.value if cause.resource else "other", scopes.kind(cause.scope) if cause.scope else "agent"
    ).inc()


def step_running(delta: int) -> None:
    STEPS.inc(delta)


def prepare(folder: str) -> None:
    """Empty the folder of an earlier run's samples (prometheus_client's rule for a restart)."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):
        stale.unlink()


def serve(port: int, host: str = "0.0.0.0") -> int:
    """Serve every process's samples on ``port`` (0: a free one) from a background
    thread; the port it listens on."""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=os.environ[DIR_ENV])
    server, _ = start_http_server(port, addr=host, registry=registry)
    return server.server_port
