"""Cancelling a job or an agent's subtree, on a real Redis: one read says whether,
and why, an agent must stop (``covey.budgets.cancels``)."""

from __future__ import annotations

import uuid

import pytest

from covey import keys
from covey.budgets.cancels import Cancels


@pytest.fixture
def cancels(redis_client):
    return Cancels(redis_client, keys.DEFAULT_JOB_TTL_SECONDS)


@pytest.fixture
def job():
    return f"cancels-{uuid.uuid4().hex}"


def test_an_agent_stops_for_its_own_cancel_or_an_ancestor_s_and_says_whose(cancels, job):
    chain = ["root", "root-sub-a", "root-sub-a-sub-b"]
    assert cancels.stopped(job, chain) is None
    cancels.cancel_agents(job, [])  # nothing to mark: nothing written
    cancels.cancel_agents(job, ["root-sub-a"])
    assert cancels.stopped(job, chain) == "agent root-sub-a was cancelled by its parent"
    assert cancels.stopped(job, chain[:2]) == "it was cancelled by its parent"
    assert cancels.stopped(job, ["root", "root-sub-c"]) is None  # a sibling goes on


def test_a_cancelled_job_stops_every_agent_first(cancels, job, redis_client):
    cancels.cancel_agents(job, ["root-sub-a"])
    assert not cancels.job_cancelled(job)
    cancels.cancel_job(job)
    assert cancels.job_cancelled(job)
    assert cancels.stopped(job, ["root"]) == cancels.stopped(job, ["root", "root-sub-a"]) == "job cancelled"
    assert 0 < redis_client.ttl(keys.cancel(job)) <= keys.DEFAULT_JOB_TTL_SECONDS
    assert 0 < redis_client.ttl(keys.stopped(job)) <= keys.DEFAULT_JOB_TTL_SECONDS
