"""Agent trees through the real CLI, client, worker and Redis."""

from __future__ import annotations

import json

import pytest

from covey.status import AgentStatus


def run_json(cli, *args):
    proc = cli("run", *args, "--json")
    assert proc.stdout, proc.stderr
    return proc, json.loads(proc.stdout)


def test_width3_depth2_tree_completes_on_one_worker_slot(cli):
    proc, result = run_json(cli, "[sim:spawn width=3 depth=2] survey the field", "--max-depth", "3")
    assert proc.returncode == 0, proc.stderr
    assert result["status"] == "completed"
    assert result["output"] == "leaves=9"
    assert result["usage"]["agents"] == 12
    assert result["usage"]["total_tokens"] == result["usage"]["prompt_tokens"] + result["usage"]["completion_tokens"]

    tree = json.loads(cli("tree", result["job_id"], "--json").stdout)
    nodes = tree["nodes"]
    assert len(nodes) == 13
    assert {n["status"] for n in nodes} == {"completed"}
    assert sorted(n["depth"] for n in nodes) == [0] + [1] * 3 + [2] * 9
    by_id = {n["agent_id"]: n for n in nodes}
    for node in nodes:
        if node["parent_id"] is not None:
            assert by_id[node["parent_id"]]["depth"] == node["depth"] - 1
            assert node["agent_id"].startswith(node["parent_id"] + "-sub-")

    ledger = json.loads(cli("ledger", result["job_id"], "--json").stdout)
    assert ledger["agents_spawned"] == 12
    assert ledger["tokens_used"] == result["usage"]["total_tokens"]
    assert ledger["cycles_used"] == result["usage"]["cycles"]


def test_token_cap_is_never_overspent_and_refused_agents_say_so(cli):
    cap = 6000
    proc, result = run_json(
        cli, "[sim:spawn width=3 depth=2] [sim:tokens 400] big survey", "--max-tokens", str(cap), "--max-depth", "3"
    )
    assert proc.returncode == 1  # the job did not complete within its cap
    ledger = json.loads(cli("ledger", result["job_id"], "--json").stdout)
    assert 0 < ledger["tokens_used"] <= cap
    assert ledger["tokens_limit"] == cap
    nodes = json.loads(cli("tree", result["job_id"], "--json").stdout)["nodes"]
    refused = [n for n in nodes if n["status"] == "budget_exceeded"]
    assert refused, nodes
    assert all(n["cause"]["kind"] == "budget" for n in refused)
    assert all(n["usage"]["total_tokens"] <= cap for n in nodes)
    assert result["agent_id"] == "root" and result["status"] != "completed"


@pytest.mark.parametrize(
    "kind, error, cause",
    [
        # the SDK retried both COVEY_MODEL_RETRIES (2) times before they failed for good
        ("500", "model call failed: HTTP 500", {"kind": "model_error", "status": 500, "retries": 2}),
        ("timeout", "model call timed out", {"kind": "model_error", "retries": 2}),
        ("bad_args", "model sent malformed arguments for tool 'calculator'", {"kind": "malformed_reply"}),
    ],
)
def test_a_failing_child_does_not_break_the_join(cli, kind, error, cause):
    proc, result = run_json(cli, f"[sim:spawn width=3 depth=1] [sim:fail {kind} part=2] check")
    assert proc.returncode == 0, proc.stderr
    assert result["status"] == "completed"
    assert result["output"].startswith(f"leaves=2 (1 not completed: {error}")
    nodes = json.loads(cli("tree", result["job_id"], "--json").stdout)["nodes"]
    assert sorted((n["depth"], n["status"]) for n in nodes) == [
        (0, "completed"),
        (1, "completed"),
        (1, "completed"),
        (1, "failed"),
    ]
    assert [{k: v for k, v in n["cause"].items() if v is not None} for n in nodes if n["cause"]] == [cause]
    assert [c["cause"] for c in result["children"] if c["status"] == "failed"] == [
        n["cause"] for n in nodes if n["cause"]
    ]


def test_a_tool_name_the_model_made_up_is_answered_and_the_agent_goes_on(cli, client):
    """The model calls ``teleport``, which no one offered: it reads that as the call's
    error, with the names it may call, and answers with a real tool the next time."""
    proc, result = run_json(cli, "[sim:fail unknown_tool] What is 2 + 3?")
    assert proc.returncode == 0, proc.stderr
    assert (result["status"], result["output"]) == ("completed", "5")
    calls = [e for e in client.job(result["job_id"]).transcript("root").events if e.kind == "model"]
    told = [m["content"] for m in calls[1].sent if m["role"] == "tool"]
    assert told == [f"error: there is no tool 'teleport'; the tools you may call are: {', '.join(calls[0].tools)}"]
    assert result["usage"]["cycles"] == len(calls) == 3  # teleport, then the calculator, then the answer


def test_agents_at_the_depth_cap_are_offered_no_spawn_tool_and_answer_as_leaves(cli, client):
    proc, result = run_json(cli, "[sim:spawn width=2 depth=2] deep", "--max-depth", "1")
    assert result["status"] == "completed"
    assert result["output"] == "leaves=2"
    nodes = json.loads(cli("tree", result["job_id"], "--json").stdout)["nodes"]
    assert sorted(n["depth"] for n in nodes) == [0, 1, 1]  # nothing was refused: nothing was tried
    assert {n["status"] for n in nodes} == {"completed"}
    rows = [row for row in client.job(result["job_id"]).ledger().agents if row.depth == 1]
    assert len(rows) == 2


def test_agent_cap_refuses_the_spawn_past_it(cli):
    proc, result = run_json(cli, "[sim:spawn width=3 depth=1] wide", "--max-agents", "2")
    assert result["status"] == "completed"
    assert result["output"].startswith("leaves=2 (1 not completed: spawn refused: agent cap")


def test_429_with_retry_after_is_retried_and_the_agent_completes(cli):
    proc, result = run_json(cli, "[sim:fail 429] What is 6 * 7?")
    assert proc.returncode == 0, proc.stderr
    assert result["output"] == "42"


def test_a_child_cannot_write_outside_its_subroot(client):
    handle = client.submit(client.spec("[sim:spawn width=2 depth=1] [sim:write ../../escape.txt] note"))
    result = handle.result(timeout=60)
    assert result.status is AgentStatus.COMPLETED
    assert all(c.output.startswith("error: WorkspaceError: path '../../escape.txt' escapes") for c in result.children)
    handle2 = client.submit(client.spec("[sim:spawn width=1 depth=1] [sim:write notes.md] keep me"))
    result2 = handle2.result(timeout=60)
    child = handle2.tree()[1]
    written = client.redis.hgetall(f"covey:{{{handle2.id}}}:workspace")
    assert written == {f".sub_agents/{child.agent_id}/notes.md": "keep me (part 1 of 1)"}
    assert result2.output == "leaves=1"
    assert client.redis.hgetall(f"covey:{{{handle.id}}}:workspace") == {}


def test_delegate_runs_one_child_as_a_tool(cli):
    proc, result = run_json(cli, "check this [sim:delegate What is 6 * 7?]")
    assert proc.returncode == 0, proc.stderr
    assert result["output"] == "42"
    assert [(c["role"], c["status"], c["output"]) for c in result["children"]] == [("delegate", "completed", "42")]
    assert result["usage"]["agents"] == 1


def test_an_agent_that_asks_is_told_its_budget_before_each_call(cli, client):
    """``--budget-notice``: each call's prompt ends with what is left, and the second
    call's says less is left than the first's (the first call's tokens spent)."""
    proc, result = run_json(cli, "What is 2 + 3?", "--budget-notice", "--max-tokens", "5000", "--agent-max-cycles", "4")
    assert proc.returncode == 0, proc.stderr
    assert result["output"] == "5"
    calls = [e for e in client.job(result["job_id"]).transcript("root").events if e.kind == "model"]
    notes = [m["content"] for e in calls for m in e.sent if m["role"] == "system" and m["content"].startswith("Budget")]
    assert notes[0] == "Budget left: 5,000 tokens, 4 model calls. Plan to give your answer within it."
    first_spent = calls[0].usage.total_tokens
    assert notes[1] == f"Budget left: {5000 - first_spent:,} tokens, 3 model calls. Plan to give your answer within it."
    assert len(notes) == len(calls)
