"""The wire contract: any Celery client can enqueue ``covey.run_job`` by name."""

from __future__ import annotations

import uuid

import pytest

from covey import Budget, InvalidSpec
from covey.client.errors import JobRefused
from covey.status import Cause, CauseKind


def test_send_task_from_a_bare_celery_client_runs_the_job(bare, client):
    sent = bare.send_task(
        "covey.run_job", kwargs={"spec": {"task": "What is 12 + 30?", "budget": {"max_tokens": 5000}}}
    )
    result = sent.get(timeout=60)
    assert result["status"] == "completed"
    assert result["output"] == "42"
    assert result["job_id"] == sent.id
    assert client.job(sent.id).status() == "completed"


def test_a_link_on_run_job_gets_the_jobs_result_after_its_tree(bare, client):
    """The root hands on to its children's chord: a callback the sender linked must
    wait for the tree, and get the job's result, not the handover."""
    done = bare.signature("celery.accumulate", options={"task_id": str(uuid.uuid4())})
    spec = {"task": "[sim:spawn width=2 depth=1] fan out", "budget": {"max_depth": 1}}
    sent = bare.send_task("covey.run_job", kwargs={"spec": spec}, link=done)
    result = sent.get(timeout=60)
    assert result["status"] == "completed" and result["usage"]["agents"] == 2
    assert bare.AsyncResult(done.id).get(timeout=30) == [result]


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
    with pytest.raises(JobRefused, match=field) as refused:
        handle.result(timeout=5)
    assert refused.value.cause == Cause(kind=CauseKind.INVALID_SPEC)


def test_unset_caps_and_model_take_the_workers_defaults(bare, client):
    defaults = client.settings.default_budget()
    sent = bare.send_task("covey.run_job", kwargs={"spec": {"task": "What is 1 + 1?"}})
    assert sent.get(timeout=60)["status"] == "completed"
    ledger = client.job(sent.id).ledger()
    assert (ledger.tokens_limit, ledger.cycles_limit, ledger.agents_limit) == (
        defaults.max_tokens,
        defaults.max_cycles,
        defaults.max_agents,
    )

    handle = client.submit(client.spec("What is 1 + 1?", budget=Budget(max_tokens=5000, max_agents=None)))
    assert handle.result(timeout=60).ok
    ledger = handle.ledger()
    assert (ledger.tokens_limit, ledger.cycles_limit, ledger.agents_limit) == (5000, defaults.max_cycles, None)


def test_client_spec_refuses_a_misspelt_cap(client):
    with pytest.raises(InvalidSpec, match="budget.max_tokenz"):
        client.spec("x", budget={"max_tokenz": 5})


def test_a_submitted_job_is_queued_until_a_worker_takes_it(settings, redis_server):
    from covey.client import Client

    # a queue no worker reads: the job stays queued, and says so
    c = Client(settings.model_copy(update={"queue": "nobody-reads-this"}))
    handle = c.submit("What is 1 + 1?")
    assert handle.status() == "queued"
    assert c.job("never-sent").status() == "unknown"
