"""An entry in covey's queue that no worker can read is dropped with one log line:
the worker lives on and runs the next job, and a job whose first message was the
unreadable entry ends refused, naming why, instead of waiting forever."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
import redis

from covey.client import Client
from covey.client.errors import JobRefused
from covey.config.settings import Settings
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker
from tests.redis_server import RedisServer

DROPPED = "dropped an unreadable entry"


@pytest.fixture(scope="module")
def fleet():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        worker = start_worker(server.url)
        try:
            wait_for_worker(client, worker)
            yield client, worker, redis.Redis.from_url(server.url, decode_responses=True)
        finally:
            client.close()
            stop_worker(worker)


def envelope(task_id: str, body: str) -> dict:
    """A ``covey.run_job`` entry as kombu's Redis transport queues one, with ``body`` as its body."""
    return {
        "body": body,
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {"lang": "py", "task": "covey.run_job", "id": task_id, "root_id": task_id},
        "properties": {
            "correlation_id": task_id,
            "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": "covey"},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
        },
    }


def encoded(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


NESTED = "[" * 100_000 + "]" * 100_000  # past the JSON reader's depth


def entries(task_id: str) -> dict[str, str]:
    return {
        "not JSON": "not json at all",
        "a JSON list": json.dumps([1, 2, 3]),
        "a body that is not base64": json.dumps(envelope(task_id, "!!!not base64!!!")),
        "a body nested too deep": json.dumps(envelope(task_id, encoded(NESTED))),
    }


def lines(worker, text: str) -> int:
    return worker.log_path.read_text().count(text)


@pytest.mark.parametrize("kind", list(entries("x")))
def test_an_unreadable_entry_is_dropped_with_one_line_and_the_worker_runs_the_next_job(fleet, kind):
    client, worker, broker = fleet
    task_id = str(uuid.uuid4())
    before = lines(worker, DROPPED)
    broker.lpush("covey", entries(task_id)[kind])
    assert client.run("What is 6 * 7?", timeout=60).output == "42"  # queued behind the entry
    assert worker.poll() is None
    assert lines(worker, DROPPED) == before + 1
    assert "Unrecoverable error" not in worker.log_path.read_text()
    if kind.startswith("a body"):  # it names its job: the job ends refused, saying why
        with pytest.raises(JobRefused, match="its message could not be read"):
            client.job(task_id).result(timeout=10)


def test_an_unreadable_copy_of_a_finished_job_s_message_leaves_the_job_as_it_was(fleet):
    client, worker, broker = fleet
    handle = client.submit("What is 2 + 3?")
    assert handle.result(timeout=60).output == "5"
    broker.lpush("covey", json.dumps(envelope(handle.id, "!!!not base64!!!")))
    assert client.run("What is 6 * 7?", timeout=60).output == "42"
    assert handle.result(timeout=10).output == "5"
    assert "the job is left as it is" in worker.log_path.read_text()
