"""Approvals on a real Redis: asked once, decided once, and the waiting agent's next
message released by the decision, or sent at once when the decision came first."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from covey import keys
from covey.events import EventType
from covey.store.approvals import MAX_REASON_CHARS, Approval, Approvals, UnknownApproval
from covey.store.checkpoints import SAVED, WOKEN, Checkpoints
from covey.store.events import EventStream
from covey.store.outbox import Message, Outbox
from covey.store.tree import Node

TTL = keys.DEFAULT_JOB_TTL_SECONDS
NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


@pytest.fixture
def job():
    return f"job-{uuid.uuid4().hex}"


def asked(job: str, call: str = "root:1:tool:c1") -> Approval:
    return Approval(
        job_id=job,
        call_id=call,
        agent_id="root",
        tool="send_mail",
        arguments='{"to": "a@b.c"}',
        requested_at=NOW,
        until=NOW + timedelta(hours=1),
    )


def mine(due: list[tuple[str, str]], job: str) -> list[tuple[str, str]]:
    """The index is every job's: this test's entries of it."""
    return [entry for entry in due if entry[0] == job]


def park(redis_client, job: str, calls: list[str]) -> tuple[int, Message]:
    """The agent's checkpoint saved to wait for decisions on ``calls``."""
    then = Message("covey.proceed", "t-root", {"agent_id": "root", "step": 1}, {"kwargsrepr": "step=1"})
    node = Node(agent_id="root", depth=0, status="waiting")
    saved = Checkpoints(redis_client, TTL).save(job, "root", 1, "{}", then=then, node=node, approvals=calls)
    return saved, then


def test_a_call_is_asked_about_once_and_decided_once(redis_client, job):
    approvals = Approvals(redis_client, TTL)
    assert approvals.request(job, asked(job))
    assert not approvals.request(job, asked(job))  # the step run again
    assert [a.call_id for a in approvals.pending(job)] == ["root:1:tool:c1"]
    assert mine(approvals.due(), job) == [(job, "root:1:tool:c1")]
    first = approvals.decide(job, "root:1:tool:c1", "denied", "x" * 5000, NOW)
    again = approvals.decide(job, "root:1:tool:c1", "approved", None, NOW)
    assert first.recorded and len(first.approval.reason) == MAX_REASON_CHARS
    assert not again.recorded and again.approval.decision == "denied"  # the first stands
    assert approvals.pending(job) == [] and mine(approvals.due(), job) == []
    events = EventStream(redis_client).after(job)
    assert [(e.type, e.decision) for e in events] == [
        (EventType.APPROVAL_REQUESTED, None),
        (EventType.APPROVAL_DECIDED, "denied"),
    ]
    with pytest.raises(UnknownApproval, match="has no approval root:9"):
        approvals.decide(job, "root:9", "approved", None, NOW)


def test_an_agent_waiting_for_a_decision_is_held_out_of_the_outbox_and_released_by_it(redis_client, job):
    approvals, outbox = Approvals(redis_client, TTL), Outbox(redis_client)
    approvals.request(job, asked(job))
    saved, then = park(redis_client, job, ["root:1:tool:c1"])
    assert saved == SAVED
    assert "root" not in outbox.messages(job)  # no reconciler sends it again: nothing is lost
    decided = approvals.decide(job, "root:1:tool:c1", "approved", None, NOW)
    assert Message.loads(decided.message) == then
    assert outbox.messages(job)["root"] == then  # expected now: a lost send is sent again
    assert not redis_client.hexists(keys.held(job), "root")


def test_a_decision_that_comes_before_the_agent_waits_sends_it_on_at_once(redis_client, job):
    approvals = Approvals(redis_client, TTL)
    approvals.request(job, asked(job))
    assert approvals.decide(job, "root:1:tool:c1", "approved", None, NOW).message is None  # no agent held yet
    saved, then = park(redis_client, job, ["root:1:tool:c1"])
    assert saved == WOKEN  # the caller sends its next message now
    assert Outbox(redis_client).messages(job)["root"] == then


def test_every_undecided_approval_is_listed_and_those_due_are_taken_in_batches(redis_client, job):
    approvals = Approvals(redis_client, TTL)
    for i in range(120):
        approvals.request(job, asked(job, f"root:1:tool:c{i}"))
    assert len(mine(approvals.due(), job)) == 120  # covey approvals lists them all
    assert len(approvals.due((NOW + timedelta(hours=2)).timestamp(), 100)) == 100
    assert mine(approvals.due(NOW.timestamp()), job) == []  # none due yet
