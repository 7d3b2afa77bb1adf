"""Checkpoints on a real Redis: one key per agent, newer rounds win, finishing deletes it."""

from __future__ import annotations

import uuid

import pytest

from covey import keys
from covey.store.checkpoints import STALE, Checkpoint, Checkpoints
from covey.store.tree import JobTree, Node

WAITING = Node(agent_id="root", depth=0, status="waiting")


@pytest.fixture
def checkpoints(redis_client):
    return Checkpoints(redis_client, keys.DEFAULT_JOB_TTL_SECONDS)


@pytest.fixture
def job():
    return f"job-{uuid.uuid4().hex}"


def test_rounds_share_one_key_and_a_stale_round_cannot_overwrite_a_newer_one(checkpoints, redis_client, job):
    assert checkpoints.save(job, "root", 1, '{"round": 1}', node=WAITING)
    assert checkpoints.save(job, "root", 2, '{"round": 2}', node=WAITING)
    assert checkpoints.save(job, "root", 1, '{"stale": true}', node=WAITING) == STALE
    assert checkpoints.save(job, "root", 2, '{"round": 2, "again": true}', node=WAITING)  # a replay of the same round
    assert checkpoints.load(job, "root") == Checkpoint(round=2, state='{"round": 2, "again": true}')
    assert redis_client.keys(f"covey:{{{job}}}:state:*") == [keys.checkpoint(job, "root")]
    assert 0 < redis_client.ttl(keys.checkpoint(job, "root")) <= keys.DEFAULT_JOB_TTL_SECONDS


def test_an_agents_final_record_retires_its_checkpoint(checkpoints, redis_client, job):
    checkpoints.save(job, "a", 1, "{}", node=Node(agent_id="a", parent_id="root", depth=1, status="waiting"))
    tree = JobTree(redis_client, keys.DEFAULT_JOB_TTL_SECONDS)
    tree.finish(job, Node(agent_id="a", depth=1, status="completed"), retire=[keys.checkpoint(job, "a")])
    assert checkpoints.load(job, "a") is None
    assert not redis_client.exists(keys.checkpoint(job, "a"))
    assert tree.node(job, "a").final
