"""Submitting with no worker running: what the client writes, and under which id."""

from __future__ import annotations

import json

import pytest

from covey import keys
from covey.client import Client
from covey.config.settings import Settings
from covey.spec import InvalidSpec
from covey.status import JobStatus
from tests.broker_queues import empty, queued
from tests.redis_server import RedisServer

TTL = 60  # the shortest COVEY_JOB_TTL allowed, far from the default week


@pytest.fixture(scope="module")
def redis_server():
    """This module's own Redis, which no worker reads: the session's may have a live
    worker, which would run (and write the records of) the jobs submitted here."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def client(redis_server):
    client = Client(Settings(redis_url=redis_server.url, job_ttl=TTL))
    yield client
    client.close()


def test_submit_and_cancel_write_keys_with_the_clients_job_ttl(client):
    handle = client.submit("What is 2 + 2?")  # no worker: the job stays queued
    handle.cancel()
    for key in (keys.submitted(handle.id), keys.cancel(handle.id)):
        assert 0 < client.redis.ttl(key) <= TTL


def test_a_job_sent_under_a_chosen_id_without_a_subscription_is_queued_under_it(client):
    client.redis.config_resetstat()
    handle = client.submit("What is 2 + 2?", job_id="chosen-1", subscribe=False)
    assert handle.id == "chosen-1" and handle.status() is JobStatus.QUEUED
    sent = client.redis.info("commandstats")
    assert "cmdstat_subscribe" not in sent and "cmdstat_unsubscribe" not in sent


def test_a_job_sent_without_a_subscription_is_the_message_send_task_sends(client):
    spec = client.spec("What is 2 + 2?", role="checker", budget={"max_tokens": 500})
    queue = client.settings.queue
    empty(client.redis, queue)
    client.submit(spec, job_id="subscribed-1")
    client.submit(spec, job_id="unsubscribed", subscribe=False)
    first, second = (
        _message(raw, job_id) for raw, job_id in zip(queued(client.redis, queue), ("subscribed-1", "unsubscribed"))
    )
    assert first == second and first["headers"]["task"] == "covey.run_job"


def test_a_job_of_higher_priority_is_queued_ahead_at_the_level_redis_pops_first(client):
    queue = client.settings.queue
    empty(client.redis, queue)
    client.submit("What is 2 + 2?", job_id="usual")
    client.submit(client.spec("What is 3 + 3?", priority=9), job_id="urgent")
    client.submit(client.spec("What is 4 + 4?", priority=4), job_id="sooner")
    order = [json.loads(raw) for raw in queued(client.redis, queue)]
    assert [(m["headers"]["id"], m["properties"]["priority"]) for m in order] == [
        ("urgent", 0),
        ("sooner", 5),
        ("usual", 9),
    ]
    assert client.redis.llen(queue) == 1  # the most urgent level is kombu's list of the queue's own name


def _message(raw: str, job_id: str) -> dict:
    """A broker message with its job id and delivery tag (new for every message) taken out."""
    message = json.loads(raw.replace(job_id, "JOB"))
    del message["properties"]["delivery_tag"]
    return message


def test_a_whitespace_only_task_is_refused_naming_the_field_before_anything_is_sent(client):
    before = client.redis.dbsize()
    with pytest.raises(InvalidSpec, match=r"^invalid job spec: task: only whitespace"):
        client.submit(" \n\t ")
    assert client.redis.dbsize() == before
