"""The ``join="each"`` protocol on a real Redis: a child that finishes while its
parent is idle sends the parent's resume; those that finish while it runs wait in
its done set and are handed over at its next wait; concurrent ends lose none and
send one resume at a time; every resume is in the outbox before anyone sends it."""

from __future__ import annotations

import threading
import uuid

import pytest

from covey import keys
from covey.status import AgentStatus
from covey.store import join
from covey.store.checkpoints import SAVED, STALE, WOKEN, Checkpoints
from covey.store.outbox import Message, Outbox
from covey.store.tree import JobTree, Node


@pytest.fixture
def job():
    return f"job-{uuid.uuid4().hex}"


@pytest.fixture
def stores(redis_client):
    ttl = keys.DEFAULT_JOB_TTL_SECONDS
    return Checkpoints(redis_client, ttl), JobTree(redis_client, ttl), Outbox(redis_client)


@pytest.fixture
def batch(redis_client):
    """The children the parent's expected resume hands it."""
    return lambda job: join.batch(redis_client, job, "root")


WAITING = Node(agent_id="root", depth=0, status="waiting")


def resume_at(step: int) -> Message:
    return Message("covey.resume", "t-root", {"agent": "root", "step": step}, {"kwargsrepr": f"step={step}"})


def wait(checkpoints: Checkpoints, job: str, step: int, children=(), taken: str | None = None, join="each") -> int:
    opened = [(c, Message("covey.agent", f"t-{c}", {"agent": c})) for c in children]
    return checkpoints.save(
        job, "root", step, "{}", taken, resume=resume_at(step), children=opened, join_kind=join, node=WAITING
    )


def end(tree: JobTree, job: str, child: str) -> str | None:
    written, resume = tree.finish(job, Node(agent_id=child, parent_id="root", status=AgentStatus.COMPLETED))
    assert written
    return resume


def test_the_first_child_to_finish_wakes_its_idle_parent_and_is_its_batch(stores, job, batch):
    checkpoints, tree, outbox = stores
    assert wait(checkpoints, job, 1, children=["a", "b"]) == SAVED
    resume = end(tree, job, "a")
    assert resume is not None and Message.loads(resume) == resume_at(1)
    assert outbox.expected(job, "root") == resume  # recorded before it is sent: the reconciler covers it
    assert batch(job) == {"a"}


def test_children_that_finish_while_the_parent_runs_are_handed_over_at_its_next_wait(stores, job, batch):
    checkpoints, tree, outbox = stores
    wait(checkpoints, job, 1, children=["a", "b", "c"])
    taken = end(tree, job, "a")  # the parent is resumed with a...
    assert end(tree, job, "b") is None and end(tree, job, "c") is None  # ...and runs while b and c end
    assert batch(job) == {"a"}  # a redelivered resume joins a alone, as the first did
    assert wait(checkpoints, job, 2, children=["d"], taken=taken) == WOKEN
    assert batch(job) == {"b", "c"}
    assert Message.loads(outbox.expected(job, "root")) == resume_at(2)
    assert "d" in outbox.messages(job)


def test_a_stale_step_hands_nothing_over(stores, job, batch):
    checkpoints, tree, _ = stores
    wait(checkpoints, job, 1, children=["a", "b"])
    taken = end(tree, job, "a")
    end(tree, job, "b")
    assert wait(checkpoints, job, 2, taken=taken) == WOKEN
    assert wait(checkpoints, job, 2, taken=taken) == STALE  # a duplicate of that step
    assert batch(job) == {"b"}


def test_now_hands_over_at_once_what_the_step_holds(stores, job, batch):
    checkpoints, _, outbox = stores
    assert wait(checkpoints, job, 1, children=["a"], join="now") == WOKEN
    assert batch(job) == set()
    assert Message.loads(outbox.expected(job, "root")) == resume_at(1)


def test_concurrent_ends_lose_no_child_and_send_one_resume(stores, redis_client, job, batch):
    checkpoints, _, _ = stores
    children = [f"c{i}" for i in range(40)]
    wait(checkpoints, job, 1, children=children)
    resumes: list[str] = []

    def finish(child: str) -> None:
        tree = JobTree(redis_client, keys.DEFAULT_JOB_TTL_SECONDS)
        resume = end(tree, job, child)
        if resume is not None:
            resumes.append(resume)

    threads = [threading.Thread(target=finish, args=(c,)) for c in children]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(resumes) == 1
    batch = batch(job)
    done = {str(m) for m in redis_client.smembers(keys.done(job, "root"))}
    assert len(batch) == 1 and batch | done == set(children) and not batch & done
