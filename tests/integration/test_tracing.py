"""One trace per job, read back from a real OTLP/HTTP receiver on loopback: a span per
agent under its parent's across two worker processes, a GenAI span per model call
whose tokens add up to the ledger's, a span per tool call."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

pytest.importorskip("opentelemetry.sdk", reason="tracing needs the otel extra: pip install 'covey[otel]'")

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker
from tests.otlp_receiver import Receiver

SPANS_SECONDS = 60  # the exporter sends in batches, every 200 ms here; a loaded machine is slower

TREE = "[sim:spawn width=10 depth=2] survey the field"  # 1 + 10 + 100 agents


@pytest.fixture(scope="module")
def receiver():
    found = Receiver()
    yield found
    found.close()


@pytest.fixture(scope="module")
def traced(redis_server, receiver):
    """A worker of two processes that exports to the receiver; its Redis is the session's."""
    otel = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_SERVICE_NAME": "covey-test",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    settings = Settings(redis_url=redis_server.url, model="sim", queue="traced")
    proc = start_worker(redis_server.url, concurrency=4, processes=2, COVEY_QUEUE="traced", **otel)
    client = Client(settings)
    wait_for_worker(client, proc)
    yield client
    client.close()
    stop_worker(proc)


def spans_of(receiver: Receiver, job_id: str, kind: str, count: int) -> list[dict]:
    """The job's spans of ``gen_ai.operation.name`` ``kind``, once ``count`` have arrived."""
    deadline = time.monotonic() + SPANS_SECONDS
    while True:
        found = [
            s
            for s in receiver.received()
            if s["attributes"].get("covey.job_id") == job_id and s["attributes"].get("gen_ai.operation.name") == kind
        ]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_a_111_agent_tree_is_one_trace_of_agent_spans_under_their_parents(traced, receiver):
    handle = traced.submit(traced.spec(TREE, budget={"max_agents": 200, "max_depth": 2}))
    result = handle.result(timeout=300)
    assert result.status == "completed" and result.usage.agents == 110, result
    agents = spans_of(receiver, handle.id, "invoke_agent", 111)
    assert len(agents) == 111
    assert {s["trace_id"] for s in agents} == {handle.id.replace("-", "")}  # the job id is the trace id
    by_agent = {s["attributes"]["covey.agent_id"]: s for s in agents}
    assert len(by_agent) == 111
    root = by_agent["root"]
    assert root["parent_span_id"] == "" and root["attributes"]["covey.status"] == "completed"
    for agent_id, span in by_agent.items():
        if agent_id != "root":
            assert span["parent_span_id"] == by_agent[span["attributes"]["covey.parent_id"]]["span_id"], agent_id
    assert Counter(s["attributes"]["covey.depth"] for s in agents) == {0: 1, 1: 10, 2: 100}
    # Named each for itself, as a trace viewer lists them: role and agent id.
    assert {s["name"] for s in agents} == {
        f"invoke_agent {s['attributes']['gen_ai.agent.name']} ({a})" for a, s in by_agent.items()
    }
    assert all(s["attributes"]["gen_ai.agent.id"] == a for a, s in by_agent.items())
    assert {s["resource"]["service.name"] for s in agents} == {"covey-test"}
    assert {s["resource"]["deployment.environment"] for s in agents} == {"test"}

    # Every task of an agent is a span under the agent's; every model call under a task.
    steps = {s["span_id"]: s for s in receiver.received() if s["attributes"].get("celery.task_name")}
    mine = [s for s in steps.values() if s["attributes"]["covey.job_id"] == handle.id]
    assert {s["parent_span_id"] for s in mine} <= {s["span_id"] for s in agents}
    assert Counter(s["name"] for s in mine)["covey.resume"] == 11  # the root and its 10 children resumed once
    starts = {s["span_id"]: s["start"] for s in agents}
    assert all(s["start"] >= starts[s["parent_span_id"]] for s in mine), "a task span starts before its agent's"
    assert not [s for s in receiver.received() if "gen_ai.input.messages" in s["attributes"]]  # content: opt-in

    calls = spans_of(receiver, handle.id, "chat", 2 * 11 + 100)
    assert len(calls) == 2 * 11 + 100  # a spawning agent calls twice (spawn, then finish), a leaf once
    assert all(s["parent_span_id"] in steps for s in calls)
    assert all(s["attributes"]["gen_ai.request.model"] == "sim" for s in calls)
    assert all(s["attributes"]["gen_ai.response.finish_reasons"] for s in calls)
    tokens = sum(
        s["attributes"]["gen_ai.usage.input_tokens"] + s["attributes"]["gen_ai.usage.output_tokens"] for s in calls
    )
    ledger = handle.ledger()
    assert tokens == ledger.tokens_used == result.usage.total_tokens


def test_a_tool_call_is_a_span_of_its_agent_and_spans_name_the_tenant(traced, receiver):
    traced.ledger.set_scope("tenant:acme", max_tokens=None, max_cycles=None)
    handle = traced.submit(traced.spec('Compute. [sim:call calculator {"expression": "6*7"}]', tenant="acme"))
    result = handle.result(timeout=120)
    assert result.ok, result
    tools = spans_of(receiver, handle.id, "execute_tool", 1)
    assert [s["attributes"]["gen_ai.tool.name"] for s in tools] == ["calculator"]
    assert tools[0]["attributes"]["covey.agent_id"] == "root"
    [agent] = spans_of(receiver, handle.id, "invoke_agent", 1)
    calls = spans_of(receiver, handle.id, "chat", 2)
    assert {s["attributes"].get("covey.tenant") for s in [agent, *tools, *calls]} == {"acme"}


def test_a_budget_refusal_is_an_event_on_the_refused_agents_task(traced, receiver):
    handle = traced.submit(traced.spec("[sim:spawn width=2 depth=1] survey", budget={"max_tokens": 300}))
    result = handle.result(timeout=120)
    assert result.status == "budget_exceeded", result
    agents = spans_of(receiver, handle.id, "invoke_agent", 1)
    refused = [s for s in agents if s["attributes"]["covey.status"] == "budget_exceeded"]
    assert refused
    deadline = time.monotonic() + SPANS_SECONDS
    while (
        not (
            events := [
                e
                for s in receiver.received()
                for e in s["events"]
                if e["name"] == "covey.budget_refused" and s["attributes"].get("covey.job_id") == handle.id
            ]
        )
        and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    assert events, "no covey.budget_refused event"
    assert any(a["key"] == "resource" and a["value"]["stringValue"] == "tokens" for a in events[0]["attributes"])


def test_a_cancelled_agent_span_says_so(traced, receiver):
    spin = "[sim:loop] [sim:latency 20] spin"
    handle = traced.submit(traced.spec(spin, budget={"max_cycles": 10_000}, max_cycles=10_000))
    deadline = time.monotonic() + 60
    while handle.ledger().cycles_used <= 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    handle.cancel()
    assert handle.result(timeout=60).status == "cancelled"
    [agent] = spans_of(receiver, handle.id, "invoke_agent", 1)
    assert agent["attributes"]["covey.status"] == "cancelled"
    assert [e["name"] for e in agent["events"]] == ["covey.cancelled"]


def test_a_worker_that_stops_sends_the_spans_it_still_held(redis_server, receiver):
    """Its exporter sends at shutdown what it batched: the command's exit runs the
    exit handlers before it skips the interpreter's teardown."""
    held = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "600000"}  # 10 min
    settings = Settings(redis_url=redis_server.url, model="sim", queue="traced-held")
    proc = start_worker(redis_server.url, concurrency=2, COVEY_QUEUE="traced-held", **held)
    client = Client(settings)
    try:
        wait_for_worker(client, proc)
        handle = client.submit(client.spec("say hello"))
        assert handle.result(timeout=60).status == "completed"
        assert not [s for s in receiver.received() if s["attributes"].get("covey.job_id") == handle.id]
    finally:
        client.close()
        stop_worker(proc)
    assert proc.returncode == 0
    [agent] = spans_of(receiver, handle.id, "invoke_agent", 1)
    assert agent["attributes"]["covey.status"] == "completed"


def test_content_is_on_the_spans_only_when_opted_in_and_redacted(redis_server, receiver):
    """``COVEY_TRACE_CONTENT=1``: the messages a call sent and its reply, a tool's
    arguments and result, the agent's task and answer, with a key the worker holds masked."""
    key = "sk-trace-" + "k" * 32
    opted = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "COVEY_TRACE_CONTENT": "1",
        "COVEY_OPENAI_API_KEY": key,
    }
    settings = Settings(redis_url=redis_server.url, model="sim", queue="traced-content")
    proc = start_worker(redis_server.url, COVEY_QUEUE="traced-content", **opted)
    client = Client(settings)
    try:
        wait_for_worker(client, proc)
        task = f'My key is {key}. [sim:call calculator {{"expression": "6*7"}}]'
        handle = client.submit(client.spec(task))
        assert handle.result(timeout=60).ok
        [agent] = spans_of(receiver, handle.id, "invoke_agent", 1)
        calls = spans_of(receiver, handle.id, "chat", 2)
        [tool] = spans_of(receiver, handle.id, "execute_tool", 1)
    finally:
        stop_worker(proc)
        client.close()
    first = json.loads(min(calls, key=lambda s: s["start"])["attributes"]["gen_ai.input.messages"])
    assert first[-1] == {"role": "user", "content": 'My key is ***. [sim:call calculator {"expression": "6*7"}]'}
    assert all(s["attributes"]["input.value"] == s["attributes"]["gen_ai.input.messages"] for s in calls)
    assert {s["attributes"]["input.mime_type"] for s in [agent, tool, *calls]} == {"application/json"}
    replies = [json.loads(s["attributes"]["gen_ai.output.messages"])[0] for s in calls]
    assert [c["name"] for r in replies for c in r["tool_calls"]][:1] == ["calculator"]
    assert json.loads(tool["attributes"]["gen_ai.tool.call.arguments"]) == '{"expression": "6*7"}'
    assert json.loads(tool["attributes"]["output.value"]) == "42"
    assert json.loads(agent["attributes"]["output.value"]) == [{"role": "assistant", "content": "42"}]
    assert key not in json.dumps([agent, tool, *calls])
