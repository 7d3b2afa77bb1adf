"""The wire contract: any Celery client can enqueue ``covey.run_job`` by name."""

from __future__ import annotations

import pytest
from celery import Celery

from covey.client import JobRefused


@pytest.fixture
def bare(redis_server, worker):
    """A Celery client that knows nothing of covey but the broker and the task name."""
    app = Celery("elsewhere", broker=redis_server.url, backend=redis_server.url)
    app.conf.update(task_serializer="json", accept_content=["json"], result_accept_content=["json"])
    app.conf.task_default_queue = "covey"
    yield app
    app.close()


def test_send_task_from_a_bare_celery_client_runs_the_job(bare, client):
    sent = bare.send_task("covey.run_job", kwargs={"spec": {"task": "What is 12 + 30?", "budget": {"max_tokens": 5000}}})
    result = sent.get(timeout=60)
    assert result["status"] == "completed"
    assert result["output"] == "42"
    assert result["job_id"] == sent.id
    assert client.job(sent.id).status() == "completed"


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"task": "x", "budget": {"max_tokens": -1}}, "budget.max_tokens"),
        ({"task": "x", "strategy": "telepathy"}, "strategy"),
        ({"task": 12}, "task"),
        ({"task": "x", "max_cycles": "many"}, "max_cycles"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_field_and_runs_nothing(bare, client, spec, field):
    sent = bare.send_task("covey.run_job", kwargs={"spec": spec})
    with pytest.raises(Exception) as caught:
        sent.get(timeout=60)
    assert f"{field}:" in str(caught.value)
    handle = client.job(sent.id)
    assert handle.status() == "refused"
    assert handle.tree() == []
    assert handle.ledger().agents == []
    with pytest.raises(JobRefused, match=field):
        handle.result(timeout=5)


def test_the_cli_refuses_bad_input_before_sending(cli):
    proc = cli("run", "x", "--max-tokens", "-3")
    assert proc.returncode == 2
    assert "budget.max_tokens" in proc.stderr
    assert "Traceback" not in proc.stderr
