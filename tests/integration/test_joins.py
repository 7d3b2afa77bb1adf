"""Joins as children finish, child timeouts and cancels, through a real worker and Redis.

The worker runs four slots: a step that starts while another still runs needs a
slot of its own."""

from __future__ import annotations

import json
import time

import pytest

from covey import keys
from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import own_worker, plugin_worker
from tests.integration.test_lost_messages import assert_whole, died, finished_by_another, killed_at
from tests.redis_server import RedisServer

QUEUE = "covey-joins"


@pytest.fixture(scope="module")
def joins(redis_server, tmp_path_factory):
    """A four-slot worker and a client with the ``probe`` and ``race`` strategies installed."""
    strategies = {"probe": "tests.integration.probe_strategy", "race": "tests.integration.race_strategy"}
    with plugin_worker(redis_server.url, tmp_path_factory.mktemp("plugins"), QUEUE, strategies, 4) as client:
        yield client


def test_a_step_starts_when_its_dependency_finishes_not_when_the_slow_step_does(joins):
    handle = joins.submit(joins.spec("[sim:plan race] go", strategy="plan_execute", budget={"max_agents": 10}))
    result = handle.result(timeout=120)
    assert result.ok, result.error
    steps = {s["id"]: s for s in result.data["steps"]}
    assert {s["status"] for s in steps.values()} == {"completed"} and set(steps) == {"slow", "fast", "after_fast"}
    nodes = {n.agent_id: n for n in handle.tree()}
    slow, after_fast = nodes[steps["slow"]["agent_id"]], nodes[steps["after_fast"]["agent_id"]]
    assert after_fast.started_at < slow.finished_at, (after_fast.started_at, slow.finished_at)
    assert [s["id"] for s in result.data["steps"]][-1] == "slow"  # taken as it finished, last
    assert result.usage.agents == 3 and nodes["root"].status == "completed"


def test_a_child_with_a_one_second_timeout_times_out_and_its_parent_completes(joins):
    child = {"task": "[sim:latency 3000] What is 2 + 2?", "strategy": "single", "timeout": 1}
    spec = joins.spec("probe", strategy="probe", options={"child": child}, timeout=60)
    handle = joins.submit(spec)
    result = handle.result(timeout=60)
    assert result.ok, result.error
    assert (result.data["status"], result.data["error"]) == ("timed_out", "deadline passed"), result.data
    (node,) = [n for n in handle.tree() if n.depth == 1]
    assert node.status == "timed_out" and node.cause.kind == "deadline"


def test_a_cancel_by_the_parent_stops_a_running_child_at_its_next_step(joins):
    # The quick child takes long enough for the spinner to be running when its parent cancels it.
    quick = {"task": "[sim:latency 1000] What is 2 + 2?", "strategy": "single", "key": "quick"}
    spinner = {"task": "[sim:latency 200] [sim:loop] spin", "strategy": "react", "key": "spinner"}
    spec = joins.spec(
        "race", strategy="race", options={"children": [quick, spinner]}, tools=["calculator"], max_cycles=200
    )
    handle = joins.submit(spec)
    result = handle.result(timeout=120)
    assert result.ok, result.error
    back = {c["key"]: c for c in result.data}
    assert [c["key"] for c in result.data] == ["quick", "spinner"]
    assert back["quick"]["status"] == "completed"
    assert (back["spinner"]["status"], back["spinner"]["error"]) == ("cancelled", "it was cancelled by its parent")
    assert 0 < back["spinner"]["cycles"] < 200  # stopped, not run out of cycles
    spun = next(n for n in handle.tree() if n.role == "agent" and n.depth == 1 and n.status == "cancelled")
    assert spun.cause.kind == "cancelled"


def test_a_cancel_by_the_parent_interrupts_a_childs_model_call_in_flight(joins):
    quick = {"task": "[sim:latency 1000] What is 2 + 2?", "strategy": "single", "key": "quick"}
    slow = {"task": "[sim:latency 60000] What is 3 + 3?", "strategy": "single", "key": "slow"}
    spec = joins.spec("race", strategy="race", options={"children": [quick, slow]}, max_cycles=20)
    result = joins.submit(spec).result(timeout=40)  # far sooner than the slow child's minute-long call
    assert result.ok, result.error
    back = {c["key"]: c for c in result.data}
    assert back["slow"]["status"] == "cancelled", back["slow"]
    assert back["slow"]["error"].startswith("model call abandoned: it was cancelled by its parent")


def test_an_agent_that_finishes_cancels_the_children_it_still_runs(joins):
    quick = {"task": "What is 2 + 2?", "strategy": "single", "key": "quick"}
    spinner = {"task": "[sim:latency 200] [sim:loop] spin", "strategy": "react", "key": "spinner"}
    options = {"children": [quick, spinner], "finish_first": True}
    handle = joins.submit(joins.spec("race", strategy="race", options=options, tools=["calculator"], max_cycles=200))
    result = handle.result(timeout=60)
    assert result.ok and [c["key"] for c in result.data] == ["quick"]
    deadline = time.monotonic() + 60
    while not (spun := next(n for n in handle.tree() if n.task.startswith("[sim:latency 200]"))).final:
        assert time.monotonic() < deadline, "the spinner ran on after its parent finished"
        time.sleep(0.05)
    assert (spun.status, spun.error) == ("cancelled", "it was cancelled by its parent")
    assert spun.usage.cycles < 200


def test_a_resume_lost_with_the_child_that_woke_its_parent_is_sent_again():
    """The first step to finish made its idle parent's resume expected and its worker
    died before sending it: the reconciler sends it, another worker ends the job whole."""
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        first = killed_at(server, client, "after_finish:kill:1")
        handle = client.submit(client.spec("[sim:plan race] go", strategy="plan_execute"))
        died(first)
        result = finished_by_another(server, handle)
        assert [s["status"] for s in result.data["steps"]] == ["completed"] * 3
        assert_whole(client, handle, result, 4)
        for key in (keys.awaited, keys.done, keys.batch):
            assert not client.redis.exists(key(handle.id, "root"))


def test_a_child_given_a_timeout_by_its_model_stops_at_it_and_its_parent_reads_why():
    # Every sim call takes 2 s: the child's 0.5 s ends its first; the parent answers what delegate said.
    with own_worker(2, COVEY_SIM_LATENCY_MS="2000") as (_, client):
        task = '[sim:call delegate {"task": "What is 2 + 3?", "timeout": 0.5}] ask'
        handle = client.submit(client.spec(task))
        result = handle.result(timeout=120)
        assert result.ok, result.error
        [child] = [n for n in handle.tree() if n.parent_id == "root"]
        assert child.status == "timed_out" and child.cause.kind == "deadline"
        said = json.loads(result.output)
        assert (said["agent_id"], said["status"]) == (child.agent_id, "timed_out")
