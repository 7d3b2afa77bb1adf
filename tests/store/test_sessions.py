"""Sessions on a real Redis: one job at a time, a turn kept once and only by the end
that was written, the oldest turns dropped past the cap and counted."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from covey import keys
from covey.store.sessions import Busy, Sessions, Turn
from covey.store.tree import JobTree, Node, pack

TTL = 3600


@pytest.fixture
def name():
    return f"s-{uuid.uuid4().hex[:8]}"


def turn(job: str, answer: str = "42") -> Turn:
    return Turn(job_id=job, task=f"task of {job}", answer=answer, at=datetime(2026, 12, 6, tzinfo=UTC))


def end(redis_client, sessions: Sessions, name: str, job: str, kept: Turn | None) -> None:
    """The job's root end, written, then its session's part, as the worker runs them."""
    root = Node(agent_id="root", depth=0, status="completed" if kept else "failed", output=kept and kept.answer)
    JobTree(redis_client, TTL).finish(job, root)
    sessions.ending(name, job, kept, pack(root))()


def test_one_job_at_a_time_and_its_turn_kept_once_by_its_end(redis_client, name):
    sessions = Sessions(redis_client, TTL, 64 * 1024)
    first, second = f"j1-{name}", f"j2-{name}"
    assert sessions.claim(name, first, 60).turns == []
    assert sessions.claim(name, first, 60).job_id == first  # the first step run again
    assert sessions.claim(name, second, 60) == Busy(first)
    end(redis_client, sessions, name, first, turn(first))
    end(redis_client, sessions, name, first, turn(first))  # the end written again
    kept = sessions.claim(name, second, 60)
    assert [t.job_id for t in kept.turns] == [first]
    assert kept.messages() == [{"role": "user", "content": f"task of {first}"}, {"role": "assistant", "content": "42"}]
    end(redis_client, sessions, name, second, None)  # it failed: no turn, the session given back
    assert sessions.read(name).job_id is None and len(sessions.read(name).turns) == 1
    assert 0 < redis_client.ttl(keys.session(name)) <= TTL


def test_an_end_that_was_not_written_keeps_no_turn(redis_client, name):
    sessions = Sessions(redis_client, TTL, 64 * 1024)
    job = f"j-{name}"
    sessions.claim(name, job, 60)
    JobTree(redis_client, TTL).finish(job, Node(agent_id="root", depth=0, status="failed", error="boom"))
    late = Node(agent_id="root", depth=0, status="completed", output="42")  # a duplicate's end, second
    sessions.ending(name, job, turn(job), pack(late))()
    assert sessions.read(name).turns == [] and sessions.read(name).job_id == job


def test_past_its_cap_a_session_drops_its_oldest_turns_and_counts_them(redis_client, name):
    sessions = Sessions(redis_client, TTL, 2048)
    for i in range(5):
        job = f"j{i}-{name}"
        sessions.claim(name, job, 60)
        end(redis_client, sessions, name, job, turn(job, answer=str(i) * 600))
    kept = sessions.read(name)
    assert [t.answer[0] for t in kept.turns] == ["3", "4"] and kept.dropped == 3
    assert sessions.delete(name) and sessions.read(name) is None and not sessions.delete(name)
