"""Where a step's spans go in its job's trace: derived ids any worker agrees on,
and the ``covey_trace`` header that carries a caller's trace along."""

from __future__ import annotations

import uuid

import pytest

pytest.importorskip("opentelemetry.sdk", reason="tracing needs the otel extra")

from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.worker import tracing

JOB = str(uuid.UUID(int=0x1234))


def test_a_job_without_a_callers_trace_is_its_own_trace_whose_id_is_the_job_id():
    here = tracing.place(JOB, "root", None, {})
    assert (here.trace_id, here.parent_span) == (0x1234, None)
    assert here.agent_span == tracing.span_id(JOB, "root") != tracing.span_id(JOB, "root-sub-1")
    assert tracing.trace_id("not-a-uuid") == tracing.trace_id("not-a-uuid") != 0


def test_a_child_sits_under_its_parents_agent_span_with_or_without_the_header():
    derived = tracing.place(JOB, "root-sub-1", "root", {})
    assert derived.parent_span == tracing.span_id(JOB, "root")
    carried = tracing.place(JOB, "root-sub-1", "root", {tracing.HEADER: f"{0xABC:032x}:{0xDEF:016x}"})
    assert (carried.trace_id, carried.parent_span) == (0xABC, 0xDEF)


def test_a_roots_run_job_joins_the_callers_traceparent():
    caller = {"traceparent": f"00-{0xCAFE:032x}-{0xBEEF:016x}-01"}
    here = tracing.place(JOB, "root", None, caller)
    assert (here.trace_id, here.parent_span) == (0xCAFE, 0xBEEF)
    assert tracing.place(JOB, "root", None, {"traceparent": "garbage"}).trace_id == 0x1234


def test_messages_carry_the_trace_and_the_receivers_parent():
    root = tracing.place(JOB, "root", None, {"traceparent": f"00-{0xCAFE:032x}-{0xBEEF:016x}-01"})
    token = tracing._place.set(root)
    try:
        child = RunContext(job_id=JOB, agent_id="root-sub-1", parent_id="root", depth=1, budget=Budget())
        own = RunContext(job_id=JOB, agent_id="root", budget=Budget())
        # A child's message names this agent as its parent; the root's own resume, the caller's span.
        assert tracing.headers(child) == {tracing.HEADER: f"{0xCAFE:032x}:{tracing.span_id(JOB, 'root'):016x}"}
        assert tracing.headers(own) == {tracing.HEADER: f"{0xCAFE:032x}:{0xBEEF:016x}"}
        resumed = tracing.place(JOB, "root", None, tracing.headers(own))
        assert resumed == root
    finally:
        tracing._place.reset(token)
    assert tracing.headers(own) == {}  # outside a step
