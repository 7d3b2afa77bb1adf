"""The tree's and the checkpoints' scripts write a job's events with the node moves
they report: one event per change of an agent's status, none for a write that
changes none or is refused (a stale step, a node already final), each once."""

from __future__ import annotations

import uuid

import pytest

from covey import keys
from covey.events import EventType
from covey.status import AgentStatus, Wait
from covey.store.checkpoints import STALE, Checkpoints
from covey.store.events import EventStream
from covey.store.tree import JobTree, Node

TTL = keys.DEFAULT_JOB_TTL_SECONDS


@pytest.fixture
def job():
    return f"job-{uuid.uuid4().hex}"


def node(status: AgentStatus, agent: str = "root", **fields) -> Node:
    parent = None if agent == "root" else "root"
    return Node(agent_id=agent, parent_id=parent, depth=0 if parent is None else 1, status=status, **fields)


def moves(redis_client, job) -> list[tuple[EventType, str]]:
    return [(e.type, e.agent_id) for e in EventStream(redis_client).after(job)]


def test_a_node_write_says_a_move_only_when_the_status_changes(redis_client, job):
    tree = JobTree(redis_client, TTL)
    tree.record(job, node(AgentStatus.RUNNING), node(AgentStatus.QUEUED, "a"))  # queued: its opening says it
    tree.record(job, node(AgentStatus.RUNNING))  # spend shown while it runs: no move
    tree.record(job, node(AgentStatus.RUNNING, "a"))
    assert moves(redis_client, job) == [(EventType.AGENT_RUNNING, "root"), (EventType.AGENT_RUNNING, "a")]


def test_an_end_says_the_agents_end_and_a_roots_the_jobs_once(redis_client, job):
    tree = JobTree(redis_client, TTL)
    tree.record(job, node(AgentStatus.RUNNING), node(AgentStatus.RUNNING, "a"))
    done = node(AgentStatus.COMPLETED, "a", output="5")
    assert tree.finish(job, done)[0]
    assert not tree.finish(job, done)[0]  # a redelivered end
    tree.record(job, node(AgentStatus.RUNNING, "a"))  # a stale step cannot take it back
    root = node(AgentStatus.FAILED, error="boom " * 100, output=None)
    assert tree.finish(job, root)[0]
    events = EventStream(redis_client).after(job)
    assert [(e.type, e.agent_id) for e in events[2:]] == [
        (EventType.AGENT_FINISHED, "a"),
        (EventType.AGENT_FINISHED, "root"),
        (EventType.JOB_FINISHED, "root"),
    ]
    assert events[2].status is AgentStatus.COMPLETED and events[2].output == "5"
    assert events[-1].final and events[-1].error == root.error  # the job's whole error, not a preview


def test_a_roots_end_keeps_the_stream_as_long_as_the_jobs_records(redis_client, job):
    tree = JobTree(redis_client, TTL)
    tree.record(job, node(AgentStatus.RUNNING))
    redis_client.persist(keys.events(job))
    assert tree.finish(job, node(AgentStatus.COMPLETED, output="5"))[0]  # the agent's end and the job's
    assert [e.type for e in EventStream(redis_client).after(job)][-2:] == [
        EventType.AGENT_FINISHED,
        EventType.JOB_FINISHED,
    ]
    assert 0 < redis_client.ttl(keys.events(job)) <= TTL


def test_a_checkpoint_says_its_agent_waits_and_on_what_and_a_stale_one_says_nothing(redis_client, job):
    saved, tree = Checkpoints(redis_client, TTL), JobTree(redis_client, TTL)
    tree.record(job, node(AgentStatus.RUNNING))
    assert saved.save(job, "root", 1, "{}", node=node(AgentStatus.WAITING), awaiting=["a", "b"])
    assert saved.save(job, "root", 0, "{}", node=node(AgentStatus.RUNNING)) == STALE
    tree.record(job, node(AgentStatus.RUNNING))  # resumed
    slot = Wait(reason="tenant:acme running cap 2/2", until="2026-12-06T00:00:00Z")
    assert saved.save(job, "root", 2, "{}", node=node(AgentStatus.WAITING, wait=slot))
    events = EventStream(redis_client).after(job)
    assert [e.type for e in events] == [
        EventType.AGENT_RUNNING,
        EventType.AGENT_WAITING,
        EventType.AGENT_RUNNING,
        EventType.AGENT_WAITING,
    ]
    assert events[1].awaiting == ["a", "b"] and events[1].wait is None
    assert events[3].wait == slot
    assert tree.node(job, "root").status is AgentStatus.WAITING  # the node moved in the same script


def test_reading_after_an_event_gives_the_ones_after_it(redis_client, job):
    tree = JobTree(redis_client, TTL)
    tree.record(job, node(AgentStatus.RUNNING), node(AgentStatus.RUNNING, "a"), node(AgentStatus.RUNNING, "b"))
    stream = EventStream(redis_client)
    first, *rest = stream.after(job)
    assert [e.agent_id for e in stream.after(job, first.id)] == [e.agent_id for e in rest] == ["a", "b"]
    assert stream.has(job, first.id) and not stream.has(job, "1-0")
    assert stream.after(job, rest[-1].id, block=0.05) == []  # nothing new within the wait
