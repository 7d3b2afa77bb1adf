"""Sessions through the worker: a fact carried from one job to the next, one job at a
time on a session, and a session past its cap that says what it dropped."""

from __future__ import annotations

import json

import pytest

from covey.status import CauseKind
from tests.integration.conftest import own_worker
from tests.integration.test_durability import wait_until


def test_a_session_carries_a_fact_from_one_job_to_the_next(cli, client):
    first = client.run(client.spec("[sim:answer The code word is falcon.] remember it", session="carry"), timeout=60)
    assert first.ok
    ran = cli("run", "--session", "carry", "--json", "[sim:recall] what was the code word?")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["output"] == "The code word is falcon."
    alone = client.run(client.spec("[sim:recall] what was the code word?"), timeout=60)
    assert alone.output == "nothing to recall"  # no session, no memory
    shown = cli("session", "show", "carry", "--json")
    turns = json.loads(shown.stdout)["turns"]
    assert [t["answer"] for t in turns] == ["The code word is falcon.", "The code word is falcon."]
    assert turns[0]["job_id"] == first.job_id
    assert cli("session", "delete", "carry").returncode == 0
    gone = cli("session", "show", "carry")
    assert gone.returncode == 1 and "no session carry" in gone.stderr


@pytest.fixture(scope="module")
def two_slots():
    """A worker with two slots, and sessions capped at 1 KiB."""
    with own_worker(concurrency=2, COVEY_SESSION_BYTES="1024") as (_, client):
        yield client


def test_jobs_on_one_session_run_one_at_a_time(two_slots):
    client = two_slots
    slow = client.submit(client.spec("[sim:latency 2000] [sim:answer first] go", session="busy"))
    wait_until(lambda: slow.status() != "queued", "the first job to take the session")
    refused = client.run(client.spec("[sim:answer second] go", session="busy"), timeout=60)
    assert refused.cause.kind is CauseKind.INVALID_SPEC
    assert refused.error == f"session busy is in use by job {slow.id}: the jobs of a session run one at a time"
    assert slow.result(timeout=60).output == "first"
    after = client.run(client.spec("[sim:recall] and now?", session="busy"), timeout=60)
    assert after.output == "first"  # the refused job left no turn, and the session is free again


def test_a_session_past_its_cap_drops_its_oldest_turns_and_the_next_job_is_told(two_slots):
    client = two_slots
    for i in range(3):
        assert client.run(client.spec(f"[sim:answer {str(i) * 400}] turn {i}", session="long"), timeout=60).ok
    kept = client.session("long")
    assert kept.dropped >= 1 and kept.turns[-1].answer == "2" * 400
    last = client.submit(client.spec("[sim:recall] and?", session="long"))
    assert last.result(timeout=60).output == "2" * 400
    system = last.transcript().events[0].sent[0]["content"]
    assert f"{kept.dropped} earlier turns of session long were dropped: past COVEY_SESSION_BYTES" in system
