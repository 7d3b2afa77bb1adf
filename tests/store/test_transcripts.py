"""Transcript entries ride the tree's and the checkpoint's scripts: written once per
key, capped per agent with a note of what was cut, kept for the job's TTL."""

from __future__ import annotations

import uuid

import pytest

from covey import keys
from covey.status import AgentStatus
from covey.store.checkpoints import STALE, WOKEN, Checkpoints
from covey.store.outbox import Message, Outbox
from covey.store.transcripts import Entries, ModelCallEvent, ToolCallEvent, Transcripts, entry_key
from covey.store.tree import JobTree, Node

TTL = 3600


@pytest.fixture
def job() -> str:
    return f"tr-{uuid.uuid4().hex}"


def model(cycle: int, text: str = "hi") -> tuple[str, str]:
    event = ModelCallEvent(cycle=cycle, sent=[{"role": "user", "content": text}], model="sim")
    return entry_key(cycle), event.model_dump_json()


def tool(cycle: int, index: int, result: str = "42") -> tuple[str, str]:
    event = ToolCallEvent(cycle=cycle, call_id=f"c{index}", tool="calculator", arguments="{}", result=result)
    return entry_key(cycle, index), event.model_dump_json()


def entries(job: str, *fields: tuple[str, str], cap: int = 10_000) -> Entries:
    return Entries(key=keys.transcript(job, "root"), cap=cap, fields=list(fields))


def running() -> Node:
    return Node(agent_id="root", status=AgentStatus.RUNNING)


def test_entries_read_back_in_the_order_they_happened_whatever_write_carried_them(redis_client, job):
    tree, saved = JobTree(redis_client, TTL), Checkpoints(redis_client, TTL)
    tree.record(job, running(), transcript=entries(job, model(1), tool(1, 0), tool(1, 1)))
    assert saved.save(job, "root", 1, "{}", transcript=entries(job, model(2)), node=running())
    written, _ = tree.finish(
        job, Node(agent_id="root", status=AgentStatus.COMPLETED), transcript=entries(job, model(10))
    )
    assert written
    t = Transcripts(redis_client).read(job, "root")
    assert [(e.kind, e.cycle) for e in t.events] == [
        ("model", 1),
        ("tool", 1),
        ("tool", 1),
        ("model", 2),
        ("model", 10),
    ]
    assert [e.call_id for e in t.events if isinstance(e, ToolCallEvent)] == ["c0", "c1"]
    assert t.cut is None
    assert 0 < redis_client.ttl(keys.transcript(job, "root")) <= TTL


def test_an_entry_sent_again_is_written_once_and_counted_once(redis_client, job):
    tree = JobTree(redis_client, TTL)
    tree.record(job, running(), transcript=entries(job, model(1)))
    once = Transcripts(redis_client).read(job, "root")
    # A redelivered step rebuilds the same entries and sends them with the next ones.
    tree.record(job, running(), transcript=entries(job, model(1), tool(1, 0)))
    tree.record(job, running(), transcript=entries(job, model(1), tool(1, 0)))
    t = Transcripts(redis_client).read(job, "root")
    assert [(e.kind, e.cycle) for e in t.events] == [("model", 1), ("tool", 1)]
    key, value = tool(1, 0)
    assert t.bytes == once.bytes + len(key) + len(value)
    stored = redis_client.hgetall(keys.transcript(job, "root"))
    assert t.bytes == sum(len(k) + len(v) for k, v in stored.items() if k[0].isdigit())


def test_past_the_cap_nothing_more_is_kept_and_the_transcript_says_from_where_and_how_much(redis_client, job):
    tree = JobTree(redis_client, TTL)
    first, second, third = model(1, "a" * 100), model(2, "b" * 500), model(3, "c")
    cap = len(first[0]) + len(first[1]) + 10
    tree.record(job, running(), transcript=entries(job, first, second, cap=cap))
    tree.record(job, running(), transcript=entries(job, third, cap=cap))  # would fit, but comes after a cut
    tree.record(job, running(), transcript=entries(job, second, third, cap=cap))  # a redelivery: counted once
    t = Transcripts(redis_client).read(job, "root")
    assert [e.cycle for e in t.events] == [1]
    assert t.cut is not None
    assert (t.cut.at, t.cut.entries) == ("call 2", 2)
    assert t.cut.bytes == sum(len(k) + len(v) for k, v in (second, third))
    assert t.bytes <= cap


def test_a_stale_checkpoint_or_a_second_finish_writes_no_entry(redis_client, job):
    tree, saved = JobTree(redis_client, TTL), Checkpoints(redis_client, TTL)
    assert saved.save(job, "root", 2, "{}", node=running())
    assert saved.save(job, "root", 1, "{}", transcript=entries(job, model(1)), node=running()) == STALE
    done = Node(agent_id="root", status=AgentStatus.COMPLETED)
    assert tree.finish(job, done)[0]
    assert not tree.finish(job, done, transcript=entries(job, model(5)))[0]
    assert Transcripts(redis_client).read(job, "root") is None


def test_an_agent_without_entries_has_no_transcript(redis_client, job):
    JobTree(redis_client, TTL).record(job, running())
    assert Transcripts(redis_client).read(job, "root") is None
    assert not redis_client.exists(keys.transcript(job, "root"))


def test_an_as_completed_wait_keeps_its_entries_apart_from_its_children_and_its_childs_end_keeps_the_childs(
    redis_client, job
):
    tree, saved, outbox = JobTree(redis_client, TTL), Checkpoints(redis_client, TTL), Outbox(redis_client)
    opened = [(c, Message("covey.agent", f"t-{c}", {"agent": c})) for c in ("a", "b")]
    resume = Message("covey.resume", "t-root", {"agent": "root", "step": 1})
    woken = saved.save(
        job,
        "root",
        1,
        "{}",
        resume=resume,
        children=opened,
        join_kind="now",
        transcript=entries(job, model(1)),
        node=running(),
    )
    assert woken == WOKEN  # the resume is due at once, and the entries are kept with it
    assert redis_client.smembers(keys.awaited(job, "root")) == {"a", "b"}  # no transcript argument taken for a child
    assert {"a", "b", "root"} <= set(outbox.messages(job))
    assert [e.cycle for e in Transcripts(redis_client).read(job, "root").events] == [1]
    assert saved.save(job, "root", 1, "{}", "not-taken", transcript=entries(job, model(2)), node=running()) == STALE
    assert [e.cycle for e in Transcripts(redis_client).read(job, "root").events] == [1]

    child = Entries(key=keys.transcript(job, "a"), cap=10_000, fields=[model(1)])
    tree.record(job, Node(agent_id="a", parent_id="root", status=AgentStatus.RUNNING), transcript=child)
    last = Entries(key=keys.transcript(job, "a"), cap=10_000, fields=[model(2)])
    done = Node(agent_id="a", parent_id="root", status=AgentStatus.COMPLETED)
    written, _ = tree.finish(job, done, retire=[keys.checkpoint(job, "a")], transcript=last)
    assert written
    # The keys an end retires are counted without the transcript's: its earlier entries stay.
    assert [e.cycle for e in Transcripts(redis_client).read(job, "a").events] == [1, 2]
