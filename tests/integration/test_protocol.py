"""The agent protocol through the real CLI, worker and Redis: honest replies,
typed children within their parent's tools, structured results, many rounds."""

from __future__ import annotations

import json
import time

import pytest

from covey import keys
from tests.integration.conftest import plugin_worker
from tests.integration.test_jobs import run_json

WIDE = "[sim:spawn width=200 depth=1] wide"
PROBE_QUEUE = "covey-probe"


@pytest.mark.slow
def test_two_hundred_children_complete_with_the_default_call_cap(cli):
    # 300,000 tokens: the root's last call reserves its prompt's bytes (200 summaries) after 200 leaves
    # each spent a prompt of every built-in tool's schema; the default 200,000 no longer holds both.
    proc, result = run_json(
        cli,
        WIDE,
        *("--max-agents", "210", "--max-depth", "2", "--max-cycles", "500", "--max-call-tokens", "4096"),
        *("--max-tokens", "300000"),
    )
    assert proc.returncode == 0, proc.stderr
    assert result["output"] == "leaves=200"
    assert result["usage"]["agents"] == 200


def test_a_spawn_cut_at_the_old_1024_cap_fails_instead_of_passing_for_an_answer(cli):
    proc, result = run_json(cli, WIDE, "--max-agents", "210", "--max-depth", "2", "--max-call-tokens", "1024")
    assert proc.returncode == 1
    assert (result["status"], result["output"], result["usage"]["agents"]) == ("failed", None, 0)
    assert result["error"].startswith("the model's reply was cut at max_call_tokens=1024; raise it with")


def test_the_per_agent_cycle_cap_is_the_ledgers_and_covey_ledger_shows_it(cli):
    proc, result = run_json(cli, "[sim:loop] spin", "--agent-max-cycles", "2")
    assert (proc.returncode, result["status"]) == (1, "budget_exceeded")
    assert result["error"] == "cycle cap reached: max_cycles=2 for this agent"
    assert result["usage"]["cycles"] == 2
    ledger = json.loads(cli("ledger", result["job_id"], "--json").stdout)
    assert ledger["agents"][0]["agent_cycles_limit"] == 2
    table = cli("ledger", result["job_id"]).stdout
    header = next(line for line in table.splitlines() if line.startswith("agent "))
    assert header.split()[-6:] == ["own", "calls", "cap", "tool", "calls", "spawned"]


def test_three_rounds_of_children_complete_and_leave_no_checkpoint_behind(client):
    handle = client.submit(client.spec("[sim:rounds 3] [sim:spawn width=2 depth=1] go", budget={"max_depth": 2}))
    result = handle.result(timeout=120)
    assert result.ok, result.error
    assert result.output == "leaves=6"
    assert len(result.children) == 6 and result.usage.agents == 6
    assert len({c.agent_id for c in result.children}) == 6
    assert client.redis.keys(keys.checkpoint(handle.id, "*")) == []
    assert client.redis.keys(keys.replies(handle.id, "*")) == []


@pytest.fixture
def probe(redis_server, tmp_path):
    """A worker and a client with the ``probe`` strategy installed."""
    with plugin_worker(
        redis_server.url, tmp_path, PROBE_QUEUE, {"probe": "tests.integration.probe_strategy"}
    ) as client:
        yield client


@pytest.mark.slow
def test_a_single_child_with_a_schema_hands_its_parent_data(probe):
    schema = {"type": "object", "properties": {"value": {"type": "number"}}, "required": ["value"]}
    child = {"task": "What is 6 * 7?", "role": "judge", "strategy": "single", "options": {"schema": schema}}
    result = probe.submit(probe.spec("probe", strategy="probe", options={"child": child})).result(timeout=60)
    assert result.ok, result.error
    assert result.data == {"status": "completed", "output": '{"value": 42}', "error": None, "data": {"value": 42}}
    assert result.children[0].data == {"value": 42} and result.children[0].role == "judge"


def test_a_child_asking_for_a_tool_its_parent_lacks_is_refused_it(probe):
    child = {"task": "[sim:write notes.md] keep me", "strategy": "react", "tools": ["write_file", "calculator"]}
    spec = probe.spec("probe", strategy="probe", options={"child": child}, tools=["calculator", "spawn_agents"])
    handle = probe.submit(spec)
    result = handle.result(timeout=60)
    assert result.ok, result.error
    assert result.data["output"] == "done: keep me", result.data  # the sim writes only when write_file is offered
    assert probe.redis.hgetall(keys.workspace(handle.id)) == {}
    rows = {row.agent_id: row for row in handle.ledger().agents}
    assert rows[result.children[0].agent_id].tools == ["calculator"]


def test_a_lost_checkpoint_fails_the_agent_keeping_what_it_spent(client):
    handle = client.submit(client.spec("[sim:spawn width=2 depth=1] [sim:latency 300] go", budget={"max_depth": 2}))
    key = keys.checkpoint(handle.id, "root")
    deadline = time.monotonic() + 60
    while not client.redis.exists(key):  # the root waits on its children
        assert time.monotonic() < deadline, "the root never fanned out"
        time.sleep(0.01)
    client.redis.delete(key)
    result = handle.result(timeout=60)
    assert result.status.value == "failed"
    assert "checkpoint of agent root lost" in result.error
    assert result.usage.cycles == 1 and result.usage.total_tokens > 0  # the spawn call, not 0
    assert client.job(handle.id).tree()[0].status == "failed"


def test_a_checkpoint_of_the_old_format_fails_the_agent_in_one_line_and_the_worker_goes_on(client):
    handle = client.submit(client.spec("[sim:spawn width=2 depth=1] [sim:latency 300] go", budget={"max_depth": 2}))
    key = keys.checkpoint(handle.id, "root")
    deadline = time.monotonic() + 60
    while not client.redis.exists(key):  # the root waits on its children
        assert time.monotonic() < deadline, "the root never fanned out"
        time.sleep(0.01)
    saved = json.loads(client.redis.hget(key, "state"))
    old = {**saved["agent"], "strategy": saved["state"]}  # format 1: no version, the state a bare dict in the agent's
    client.redis.hset(key, "state", json.dumps(old))
    result = handle.result(timeout=60)
    assert result.status.value == "failed"
    assert result.error == "checkpoint refused: written with no format version (format 1); this worker reads format 3"
    assert result.usage.cycles == 1  # the spawn call, as its node recorded it
    assert client.submit(client.spec("What is 2 + 2?")).result(timeout=60).output == "4"
