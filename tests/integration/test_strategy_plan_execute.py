"""plan_execute through the real CLI, worker and Redis, driven by the sim's ``plan`` script."""

from __future__ import annotations

import json

from tests.integration.test_jobs import run_json


def _children(client, job_id):
    return sorted((n for n in client.job(job_id).tree() if n.depth == 1), key=lambda n: n.started_at)


def test_a_question_is_planned_computed_checked_and_answered(cli, client):
    proc, result = run_json(cli, "What is 6 * 7?", "--strategy", "plan_execute")
    assert proc.returncode == 0, proc.stderr
    assert (result["status"], result["output"]) == ("completed", "42")
    steps = result["data"]["steps"]
    assert [(s["id"], s["tool"], s["role"], s["status"], s["output"]) for s in steps] == [
        ("step_1", "calculator", None, "completed", "42"),
        ("step_2", None, "checker", "completed", "42"),
    ]
    for step in steps:  # the tool step as the worker ran its call, the agent step as its child ran
        assert step["started_at"] <= step["finished_at"], step
    assert result["data"]["replans"] == 0
    shown = cli("plan", result["job_id"])
    assert shown.returncode == 0, shown.stderr
    head, tool_row, agent_row = shown.stdout.splitlines()
    assert head.split() == ["step", "by", "status", "started", "seconds", "input", "output", "or", "error"]
    assert tool_row.split()[:4] == ["step_1", "tool", "calculator", "completed"]
    assert agent_row.split()[:3] == ["step_2", "checker", "completed"]
    assert cli("plan", result["job_id"], "--json").stdout.strip() == json.dumps(steps, indent=2)
    (checker_id,) = [s["agent_id"] for s in steps if s["agent_id"]]
    single = cli("plan", result["job_id"], checker_id)
    assert single.returncode == 1 and "ran no plan (its strategy is not plan_execute)" in single.stderr

    (checker,) = _children(client, result["job_id"])
    assert (checker.role, checker.status, checker.depth) == ("checker", "completed", 1)
    assert checker.task == "Check that 42 answers: What is 6 * 7?"
    assert checker.agent_id == steps[1]["agent_id"] and checker.started_at <= checker.finished_at
    assert result["usage"]["agents"] == 1


def test_a_cyclic_plan_is_refused_naming_the_cycle_then_replanned(client):
    result = client.submit(client.spec("[sim:plan cycle] What is 9 - 4?", strategy="plan_execute")).result(timeout=60)
    assert result.ok, result.error
    assert result.output == "5"
    assert result.data["replans"] == 1
    assert result.data["errors"] == ["plan refused: cycle: step_1 -> step_2 -> step_1"]
    assert [s["status"] for s in result.data["steps"]] == ["completed", "completed"]


def test_a_failing_step_is_replanned_and_the_job_still_completes(client):
    handle = client.submit(client.spec("[sim:plan fail] What is 12 * 3?", strategy="plan_execute"))
    result = handle.result(timeout=60)
    assert result.ok, result.error
    assert result.output == "36"
    assert result.data["replans"] == 1
    assert result.data["errors"][0].startswith("step step_2 failed: model call failed: HTTP 500")
    assert [(s["id"], s["status"]) for s in result.data["steps"]] == [
        ("step_1", "completed"),
        ("step_2", "failed"),
        ("step_2", "completed"),
    ]
    failed, retried = _children(client, handle.id)
    assert (failed.role, failed.status, retried.role, retried.status) == ("checker", "failed", "checker", "completed")
    assert failed.task.endswith("[sim:fail 500]") and retried.task == "Check that 36 answers: What is 12 * 3?"


def test_a_tight_token_cap_is_never_overspent(cli):
    cap = 1800  # the planner's first call fits (its prompt, every tool named in it, reserves ~1500), little more
    proc, result = run_json(cli, "What is 6 * 7?", "--strategy", "plan_execute", "--max-tokens", str(cap))
    ledger = json.loads(cli("ledger", result["job_id"], "--json").stdout)
    assert 0 < ledger["tokens_used"] <= cap
    assert result["usage"]["total_tokens"] == ledger["tokens_used"]


def test_a_tool_step_whose_input_is_json_but_no_object_fails_as_a_step_and_is_replanned(client):
    """A model-written plan may give ``write_file`` a JSON list: the step fails with the
    tool's own error (checked against its schema before the call) and the job goes on."""
    handle = client.submit(client.spec("[sim:plan write] What is 6 * 7?", strategy="plan_execute"))
    result = handle.result(timeout=60)
    assert result.ok, result.error
    assert result.output == "42"
    assert result.data["errors"] == ["step notes failed: tool 'write_file': arguments must be a JSON object, not list"]
    assert [(s["id"], s["status"]) for s in result.data["steps"]] == [
        ("notes", "failed"),
        ("step_1", "completed"),
        ("step_2", "completed"),
    ]
    assert handle.tree()[0].status == "completed"
