"""The ledger's scripts write a job's events with the state they report, and only
then: a call run again (a redelivered step) writes no event twice, and a refused
one writes none."""

from __future__ import annotations

import uuid

import pytest

from covey import keys
from covey.budgets.budget import Budget
from covey.events import EventType, JobEvent
from covey.store.events import EventStream


@pytest.fixture
def job():
    return f"job-{uuid.uuid4().hex}"


def said(kind: EventType, agent: str = "root", **fields) -> str:
    return JobEvent(type=kind, agent_id=agent, **fields).dumps()


def written(redis_client, job) -> list[tuple[EventType, str, str | None]]:
    return [(e.type, e.agent_id, e.call_id) for e in EventStream(redis_client).after(job)]


def test_an_agent_is_said_opened_once_however_often_it_is_opened(ledger, redis_client, job):
    opened = said(EventType.AGENT_OPENED)
    for _ in range(2):
        ledger.open_root(job, "root", Budget(max_tokens=1000, max_agents=1), event=opened)
    child = said(EventType.AGENT_OPENED, "root-sub-a", parent_id="root")
    assert ledger.open(job, ["root"], "root-sub-a", Budget(), event=child).ok
    assert ledger.open(job, ["root"], "root-sub-a", Budget(), event=child).ok  # the spawn's step run again
    refused = said(EventType.AGENT_OPENED, "root-sub-b", parent_id="root")
    assert not ledger.open(job, ["root"], "root-sub-b", Budget(), event=refused).ok  # past max_agents
    assert written(redis_client, job) == [
        (EventType.AGENT_OPENED, "root", None),
        (EventType.AGENT_OPENED, "root-sub-a", None),
    ]


def test_a_model_call_is_said_started_when_reserved_and_finished_when_settled_each_once(ledger, redis_client, job):
    ledger.open_root(job, "root", Budget(max_tokens=1000))
    start, end = said(EventType.MODEL_STARTED, call_id="root:1"), said(EventType.MODEL_FINISHED, call_id="root:1")
    grant = ledger.reserve(job, ["root"], [], "root:1", 300, 10, event=start)
    assert ledger.reserve(job, ["root"], [], "root:1", 300, 10, event=start).tokens == grant.tokens  # a rerun's
    assert ledger.settle(job, ["root"], [], "root:1", 120, event=end)
    assert not ledger.settle(job, ["root"], [], "root:1", 120, event=end)  # settled already
    assert ledger.reserve(job, ["root"], [], "root:1", 300, 10, event=start).ok  # a replay of the settled call
    refused = said(EventType.MODEL_STARTED, call_id="root:2")
    assert not ledger.reserve(job, ["root"], [], "root:2", 5000, 2000, event=refused).ok
    events = EventStream(redis_client).after(job)
    assert [(e.type, e.call_id) for e in events] == [
        (EventType.MODEL_STARTED, "root:1"),
        (EventType.MODEL_FINISHED, "root:1"),
    ]
    assert events[0].reserved == grant.tokens == 300  # what only the script knew
    assert events[0].id < events[1].id


def test_a_tool_call_is_said_started_when_counted_and_finished_when_its_first_result_is_kept(ledger, redis_client, job):
    ledger.open_root(job, "root", Budget(max_tool_calls=1))
    start, end = said(EventType.TOOL_STARTED, call_id="t1"), said(EventType.TOOL_FINISHED, call_id="t1")
    assert ledger.count_tool_call(job, ["root"], "t1", start).ok
    assert ledger.count_tool_call(job, ["root"], "t1", start).ok  # a rerun, before the result was kept
    ledger.record_tool_call(job, "root", "t1", "first", end)
    ledger.record_tool_call(job, "root", "t1", "second", end)  # a run cut off by a crash, run again
    assert ledger.count_tool_call(job, ["root"], "t1", start).record == "first"  # the result the model read stays
    assert not ledger.count_tool_call(job, ["root"], "t2", said(EventType.TOOL_STARTED, call_id="t2")).ok  # past cap
    assert written(redis_client, job) == [
        (EventType.TOOL_STARTED, "root", "t1"),
        (EventType.TOOL_FINISHED, "root", "t1"),
    ]


def test_a_jobs_events_live_as_long_as_its_records(ledger, redis_client, job):
    ledger.open_root(job, "root", Budget(), event=said(EventType.AGENT_OPENED))
    assert 0 < redis_client.ttl(keys.events(job)) <= keys.DEFAULT_JOB_TTL_SECONDS
