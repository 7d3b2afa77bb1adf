"""Only covey's own messages run agents: forged covey.agent, covey.resume and
run_job messages are refused, and so is a real message replayed under another task
id; the job they aim at is untouched."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from celery import Celery

from covey.context import RunContext
from covey.spec import AgentSpec, InvalidSpec
from covey.worker import signing
from tests.integration.test_durability import wait_until


@pytest.fixture
def broker(redis_server, worker):
    """Anyone who can reach the broker: a Celery client that knows covey's task names."""
    app = Celery("intruder", broker=redis_server.url, backend=redis_server.url)
    app.conf.update(task_serializer="json", accept_content=["json"], result_accept_content=["json"])
    yield app
    app.close()


def snapshot(client, job_id):
    """The job's own records (its rows, not the global scopes every job charges)."""
    handle = client.job(job_id)
    rows = handle.ledger().model_dump(exclude={"scopes"})
    return handle.tree(), rows, client.redis.hgetall(f"covey:{{{job_id}}}:workspace")


def chase(client):
    """Run a job behind the forgeries: the session worker (one slot) took them first."""
    assert client.run("What is 1 + 1?", timeout=60).ok


def victim(client):
    handle = client.submit(client.spec("[sim:spawn width=2 depth=1] What is 2 + 3?", budget={"max_depth": 2}))
    result = handle.result(timeout=60)
    assert result.ok
    return handle, result


def agent_message(job_id: str, agent_id: str) -> dict:
    ctx = RunContext(
        job_id=job_id,
        agent_id=agent_id,
        parent_id="root",
        depth=1,
        ancestors=["root"],
        budget={"max_tokens": 10**9, "max_depth": 3},
        scopes=["global"],
        subroot=f".sub_agents/{agent_id}",
    )
    spec = AgentSpec(task="[sim:write pwned.md] pwned", role="worker")
    return {"ctx": ctx.model_dump(mode="json"), "spec": spec.model_dump(mode="json")}


@pytest.mark.parametrize("form", ["ids", "context and spec"])
@pytest.mark.parametrize("signature", [None, "0" * 64, "made with another secret"])
def test_a_forged_agent_message_is_refused(client, broker, signature, form):
    """Forged in today's form (the agent's ids) or the previous release's (its context and spec)."""
    handle, _ = victim(client)
    child = handle.tree()[1].agent_id  # an agent its ledger really opened
    before = snapshot(client, handle.id)
    wire = {"job_id": handle.id, "agent_id": child} if form == "ids" else agent_message(handle.id, child)
    task_id = str(uuid.uuid4())
    if signature == "made with another secret":
        signature = signing.sign(b"not the deployment's secret", task_id, wire)
    forged = broker.send_task("covey.agent", kwargs={**wire, "sig": signature}, queue="covey", task_id=task_id)
    chase(client)
    assert snapshot(client, handle.id) == before
    assert forged.state in ("PENDING", "STARTED")  # no result was stored under its id


def test_a_forged_resume_cannot_feed_a_parent_fake_results(client, broker):
    handle, result = victim(client)
    before = snapshot(client, handle.id)
    fake = [
        {"job_id": handle.id, "agent_id": c.agent_id, "status": "completed", "output": "leaves=999"}
        for c in result.children
    ]
    broker.send_task(
        "covey.resume",
        args=[fake],
        kwargs={"job_id": handle.id, "agent_id": "root", "spawn_round": 1},
        queue="covey",
        task_id=handle.id,
    )
    chase(client)
    assert snapshot(client, handle.id) == before
    assert client.job(handle.id).result(timeout=5).output == result.output == "leaves=2"


def test_a_run_job_reusing_a_running_jobs_id_is_refused(client, broker):
    running = client.submit(client.spec("[sim:latency 1500] What is 2 + 2?"))
    broker.send_task(
        "covey.run_job", kwargs={"spec": {"task": "[sim:answer hijacked] x"}}, queue="covey", task_id=running.id
    )
    assert running.result(timeout=60).output == "4"
    chase(client)
    assert client.job(running.id).result(timeout=5).output == "4"
    assert [n.task for n in client.job(running.id).tree()] == ["[sim:latency 1500] What is 2 + 2?"]


def test_a_run_job_reusing_a_finished_jobs_id_runs_nothing_and_stores_nothing(client, broker):
    finished = client.submit(client.spec("What is 2 + 2?"))
    assert finished.result(timeout=60).output == "4"
    before = snapshot(client, finished.id)
    client.redis.delete(f"celery-task-meta-{finished.id}")  # its result expired; its records live on
    broker.send_task(
        "covey.run_job", kwargs={"spec": {"task": "[sim:answer hijacked] x"}}, queue="covey", task_id=finished.id
    )
    chase(client)
    assert snapshot(client, finished.id) == before
    assert client.app.AsyncResult(finished.id).state == "PENDING"  # neither the other spec's answer nor the old one


def test_the_client_refuses_a_job_id_that_is_already_a_job_of_another_spec(client):
    spec = client.spec("What is 2 + 2?")
    finished = client.submit(spec)
    assert finished.result(timeout=60).output == "4"
    with pytest.raises(InvalidSpec, match=f"{finished.id} is already a job of another spec"):
        client.submit(client.spec("[sim:answer hijacked] x"), job_id=finished.id)
    assert client.submit(spec, job_id=finished.id).result(timeout=60).output == "4"  # the same job sent again


def in_flight(client, task: str) -> dict:
    """The arguments of a ``task`` message the worker holds unacknowledged: what
    anyone who reaches the broker can read."""
    for raw in client.redis.hvals("unacked"):
        message = json.loads(raw)[0]
        if message["headers"]["task"] == task:
            return json.loads(base64.b64decode(message["body"]))[1]
    return {}


def test_a_real_agent_message_replayed_under_another_task_id_is_refused(client, broker):
    handle = client.submit(
        client.spec("[sim:spawn width=1 depth=1] [sim:latency 600] What is 2 + 3?", budget={"max_depth": 2})
    )
    captured: dict = {}
    wait_until(lambda: captured.update(in_flight(client, "covey.agent")) or captured, "a child's message in flight")
    assert handle.result(timeout=60).ok
    before = snapshot(client, handle.id)
    replayed = broker.send_task("covey.agent", kwargs=captured, queue="covey", task_id=str(uuid.uuid4()))
    chase(client)
    assert snapshot(client, handle.id) == before
    assert replayed.state == "PENDING"  # refused unread: no result under the id it was replayed as
