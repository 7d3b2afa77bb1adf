"""Tool calls that wait for a person, on a worker with one slot: the waiting agent
holds none, a decision from the CLI or the client sends it on, an approved call
runs once (delivered twice too), a denial or an expiry reaches the model, and a
cancel ends the wait."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from covey.client import Client
from covey.events import EventType
from covey.store.outbox import Message
from tests.integration.conftest import ROOT, called, own_worker
from tests.integration.test_durability import wait_until
from tests.integration.test_tools import covey


@pytest.fixture(scope="module")
def served():
    with own_worker(COVEY_TOOLS="tests.integration.served_tools", PYTHONPATH=str(ROOT)) as served:
        yield served


def tallied(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def waiting(client: Client, task: str, **fields):
    job = client.submit(client.spec(task, tools=called(task), **fields))
    # Asked for first, then waiting: the agent's checkpoint follows its request.
    wait_until(lambda: job.pending() and job.status() == "waiting", "the call to wait for a decision")
    return job


def test_a_waiting_call_holds_no_slot_and_once_approved_from_the_cli_runs_once(served, tmp_path):
    server, client = served
    tally = tmp_path / "tally"
    job = waiting(client, f'[sim:latency 2000] [sim:call tally {{"path": "{tally}"}}] count', approve=["tal*"])
    assert "wait for a person's approval" in job.why_stuck()
    other = client.submit(client.spec("What is 2 + 3?"))
    assert other.result(timeout=60).output == "5"  # the worker's one slot ran another job meanwhile

    listed = covey(server, "approvals", "--json")
    (call,) = json.loads(listed.stdout)
    assert (call["job_id"], call["tool"], call["agent_id"]) == (job.id, "tally", "root")
    assert json.loads(call["arguments"]) == {"path": str(tally)}
    approved = covey(server, "approve", job.id, call["call_id"])
    assert approved.returncode == 0 and "goes on" in approved.stdout, approved
    again = job.approve(call["call_id"])  # sent twice, while the job still runs: it counts once
    assert not again.recorded and again.approval.decision == "approved"

    result = job.result(timeout=60)
    assert result.ok and result.output.startswith("tallied"), result.error
    assert len(tallied(tally)) == 1
    kinds = [e.type for e in job.events()]
    assert kinds.count(EventType.APPROVAL_REQUESTED) == kinds.count(EventType.APPROVAL_DECIDED) == 1
    assert kinds.count(EventType.TOOL_FINISHED) == 1
    ended = covey(server, "deny", job.id, call["call_id"])
    assert ended.returncode == 1 and f"job {job.id} is finished (completed)" in ended.stderr


def test_an_approval_delivered_twice_runs_its_call_once(served, tmp_path):
    _, client = served
    tally = tmp_path / "tally"
    job = waiting(client, f'[sim:call tally {{"path": "{tally}"}}] count', approve=["tally"])
    decided = job.approve(job.pending()[0].call_id)
    Message.loads(decided.message).send(client.app)  # the agent's next step, a second time
    assert job.result(timeout=60).ok
    assert len(tallied(tally)) == 1


def test_a_denial_or_an_expiry_reaches_the_model_and_the_call_never_runs(served, tmp_path):
    _, client = served
    tally = tmp_path / "tally"
    task = f'[sim:call tally {{"path": "{tally}"}}] count'
    denied = waiting(client, task, approve=["tally"])
    assert denied.deny(denied.pending()[0].call_id, "not on a Sunday").recorded
    assert denied.result(timeout=60).output == "error: a person denied this call: not on a Sunday"

    expired = client.submit(client.spec(task, tools=["tally"], approve=["tally"], approval_timeout=1))
    assert expired.result(timeout=60).output.startswith("error: no one approved this call in time")
    assert tallied(tally) == []


def test_a_tool_asks_for_approval_of_the_calls_its_predicate_names(served, tmp_path):
    _, client = served
    paid = tmp_path / "paid"
    small = client.submit(client.spec(f'[sim:call pay {{"amount": 5, "path": "{paid}"}}] pay', tools=["pay"]))
    assert small.result(timeout=60).output == "paid 5"  # no one was asked
    large = waiting(client, f'[sim:call pay {{"amount": 500, "path": "{paid}"}}] pay')
    large.approve(large.pending()[0].call_id)
    assert large.result(timeout=60).output == "paid 500"
    assert [line.split()[1] for line in tallied(paid)] == ["5", "500"]


def test_a_cancel_ends_a_job_waiting_for_a_decision(served, tmp_path):
    server, client = served
    job = waiting(client, f'[sim:call tally {{"path": "{tmp_path / "tally"}"}}] count', approve=["tally"])
    unknown = covey(server, "approve", job.id, "root:9:tool:nope")
    assert unknown.returncode == 1 and f"Error: job {job.id} has no approval root:9:tool:nope" in unknown.stderr
    job.cancel()
    assert job.result(timeout=60).status == "cancelled"
    assert job.pending() == []
