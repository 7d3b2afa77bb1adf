"""The outbox on a real Redis: messages recorded with the checkpoint, stale steps
refused, final nodes never written over, and the last child's end hands over its
parent's resume, once."""

from __future__ import annotations

import uuid

import pytest

from covey import keys
from covey.store.checkpoints import STALE, Checkpoints
from covey.store.outbox import Message, Outbox
from covey.store.tree import JobTree, Node


@pytest.fixture
def job():
    return f"job-{uuid.uuid4().hex}"


@pytest.fixture
def stores(redis_client):
    ttl = keys.DEFAULT_JOB_TTL_SECONDS
    return Checkpoints(redis_client, ttl), JobTree(redis_client, ttl), Outbox(redis_client)


def waiting(agent: str) -> Node:
    return Node(agent_id=agent, depth=0 if agent == "root" else 1, status="waiting")


def message(name: str, task_id: str, **kwargs) -> Message:
    return Message(name, task_id, kwargs, {"kwargsrepr": f"{name} {kwargs}"})


def fan_out(checkpoints: Checkpoints, job: str, taken: str | None = None) -> bool:
    children = [(c, message("covey.agent", f"t-{c}", agent=c)) for c in ("a", "b")]
    resume = message("covey.resume", "t-root", agent="root", spawn_round=1)
    return checkpoints.save(job, "root", 1, "{}", taken, resume=resume, children=children, node=waiting("root"))


def test_a_fan_out_records_its_children_and_the_job_in_the_index(stores, job):
    checkpoints, _, outbox = stores
    assert fan_out(checkpoints, job)
    assert set(outbox.messages(job)) == {"a", "b"}
    assert Message.loads(outbox.expected(job, "a")).carried_by("covey.agent", "t-a", {"agent": "a"})
    assert job in outbox.jobs()


def test_a_look_at_many_jobs_reads_each_and_drops_those_expecting_nothing(stores, redis_client, job):
    checkpoints, _, outbox = stores
    done = f"{job}-done"
    assert fan_out(checkpoints, job)
    redis_client.sadd(keys.expecting(), done)  # its last message was taken up: nothing expected
    read = outbox.messages_of([job, done])
    assert set(read) == {job, done}
    assert set(read[job]) == {"a", "b"} and read[done] == {}
    assert job in outbox.jobs() and done not in outbox.jobs()


def test_a_step_whose_message_is_no_longer_expected_saves_nothing(stores, redis_client, job):
    checkpoints, _, outbox = stores
    fan_out(checkpoints, job)
    taken = outbox.expected(job, "a")
    then = message("covey.proceed", "t-a", agent="a", step=1)
    assert checkpoints.save(job, "a", 1, '{"first": true}', taken, then=then, node=waiting("a"))
    assert (
        checkpoints.save(job, "a", 1, '{"duplicate": true}', taken, then=then, node=waiting("a")) == STALE
    )  # the same message again
    assert checkpoints.load(job, "a").state == '{"first": true}'
    assert Message.loads(outbox.expected(job, "a")) == then


def test_a_final_node_is_never_written_over(stores, job):
    _, tree, _ = stores
    assert tree.finish(job, Node(agent_id="a", parent_id="root", depth=1, status="completed", output="5"))[0]
    assert tree.record(job, Node(agent_id="a", parent_id="root", depth=1, status="queued")) == 0
    assert not tree.finish(job, Node(agent_id="a", parent_id="root", depth=1, status="failed"))[0]
    assert (tree.node(job, "a").status.value, tree.node(job, "a").output) == ("completed", "5")


def test_the_last_child_to_finish_hands_over_the_resume_once(stores, job):
    checkpoints, tree, outbox = stores
    fan_out(checkpoints, job)
    child = {c: Node(agent_id=c, parent_id="root", depth=1, status="completed") for c in ("a", "b")}
    assert tree.finish(job, child["a"]) == (True, None)
    written, resume = tree.finish(job, child["b"])
    assert written and Message.loads(resume).name == "covey.resume"
    assert outbox.expected(job, "root") == resume
    assert tree.finish(job, child["b"]) == (False, None)  # a duplicate end sends nothing
    assert set(outbox.messages(job)) == {"root"}
