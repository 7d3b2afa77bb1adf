"""orchestrate through the real CLI, client, worker and Redis."""

from __future__ import annotations

import json

from covey.status import AgentStatus
from covey.tools.builtin import SPAWN_TOOLS

ANALYSTS = ["SecurityExpert", "LinterExpert"]


def run(client, task: str, **fields):
    handle = client.submit(client.spec(task, strategy="orchestrate", **fields))
    return handle, handle.result(timeout=60)


def test_it_answers_from_its_specialists_reports(client):
    handle, result = run(client, "What is 6 * 7?")
    assert result.status is AgentStatus.COMPLETED, result.error
    assert result.output == "42"
    assert result.data["decision"]["rationale"] == "SecurityExpert, LinterExpert reported 42"
    assert [(r["specialist"], r["status"]) for r in result.data["reports"]] == [
        ("SecurityExpert", "completed"),
        ("LinterExpert", "completed"),
        ("Writer", "completed"),
        ("QATester", "completed"),
    ]
    assert result.usage.agents == 4
    assert result.data["rounds"] == 1 and [v["passed"] for v in result.data["verdicts"][0]] == [True]

    nodes = handle.tree()
    children = [n for n in nodes if n.parent_id == "root"]
    assert sorted(n.role for n in children) == ["LinterExpert", "QATester", "SecurityExpert", "Writer"]
    assert {n.status for n in nodes} == {"completed"}
    writer = next(n for n in children if n.role == "Writer")
    written = client.redis.hgetall(f"covey:{{{handle.id}}}:workspace")
    assert list(written) == [f".sub_agents/{writer.agent_id}/orchestrate/answer.md"]
    assert "SecurityExpert (completed): 42" in next(iter(written.values()))


def test_the_write_step_starts_only_after_every_analysis_step_finished(client):
    handle, result = run(client, "What is 9 - 4?")
    assert result.output == "5"
    children = [n for n in handle.tree() if n.depth == 1]
    analysis = [n for n in children if n.role in ANALYSTS]
    (writer,) = [n for n in children if n.role == "Writer"]
    assert len(analysis) == 2
    assert writer.started_at >= max(n.finished_at for n in analysis)


def test_a_failed_verification_runs_a_second_round_whose_writes_never_overlap(client):
    handle, result = run(client, "[sim:orchestrate qa_fail=1] What is 6 * 7?")
    assert result.status is AgentStatus.COMPLETED, result.error
    assert result.output == "42"
    assert result.data["rounds"] == 2
    assert [[v["passed"] for v in verdicts] for verdicts in result.data["verdicts"]] == [[False], [True]]
    assert result.usage.agents == 8  # 4 specialists, twice
    children = sorted((n for n in handle.tree() if n.depth == 1), key=lambda n: n.started_at)
    writers = [n for n in children if n.role == "Writer"]
    checkers = [n for n in children if n.role == "QATester"]
    assert len(writers) == 2 and len(checkers) == 2
    # Round 1's writer, then its verification, then round 2's writer: no two writes at once.
    assert writers[0].finished_at <= checkers[0].started_at
    assert checkers[0].finished_at <= writers[1].started_at
    second_round = [n for n in children if n.started_at >= checkers[0].finished_at]
    assert sorted(n.role for n in second_round) == ["LinterExpert", "QATester", "SecurityExpert", "Writer"]
    written = client.redis.hgetall(f"covey:{{{handle.id}}}:workspace")
    second = written[f".sub_agents/{writers[1].agent_id}/orchestrate/answer.md"]
    assert "verification failed in round 1" in second and "QATester: round 1:" in second


def test_no_specialist_is_offered_spawn_tools_whatever_the_options_say(client):
    leaky = [
        {"name": "Auditor", "role": "auditor", "tools": ["spawn_agents", "calculator", "delegate"]},
        {"name": "Checker", "role": "checker", "tools": ["delegate", "calculator"]},
        {"name": "Scribe", "role": "scribe", "kind": "write", "tools": ["spawn_agents", "write_file"]},
    ]
    handle, result = run(client, "What is 3 * 5?", options={"specialists": leaky})
    assert result.output == "15"
    rows = [row for row in handle.ledger().agents if row.depth == 1]
    assert sorted(row.tools for row in rows) == [["calculator"], ["calculator"], ["write_file"]]
    assert not any(SPAWN_TOOLS & set(row.tools) for row in rows)


def test_a_failing_specialist_says_so_and_the_orchestrator_still_decides(client):
    handle, result = run(client, "[sim:orchestrate fail=SecurityExpert] What is 6 * 7?")
    assert result.status is AgentStatus.COMPLETED
    assert result.output == "42"
    security = result.data["reports"][0]
    assert (security["specialist"], security["status"]) == ("SecurityExpert", "failed")
    assert security["report"].startswith("failed: model call failed: HTTP 500")
    assert result.data["decision"]["rationale"] == "LinterExpert reported 42"
    statuses = {n.role: n.status for n in handle.tree() if n.depth == 1}
    assert statuses == {
        "SecurityExpert": "failed",
        "LinterExpert": "completed",
        "Writer": "completed",
        "QATester": "completed",
    }


def test_a_specialist_refused_by_the_agent_cap_is_reported_as_such(client):
    handle, result = run(client, "What is 6 * 7?", budget={"max_agents": 1})
    assert result.status is AgentStatus.COMPLETED
    assert result.output == "42"
    assert [r["status"] for r in result.data["reports"]] == ["completed"] + ["budget_exceeded"] * 3
    assert "agent cap" in result.data["reports"][1]["report"]


def test_a_tight_token_cap_is_never_overspent(cli):
    cap = 3000  # the orchestrator's first call fits (its prompt reserves ~2300), little else does
    proc = cli("run", "What is 6 * 7?", "--strategy", "orchestrate", "--max-tokens", str(cap), "--json")
    result = json.loads(proc.stdout)
    ledger = json.loads(cli("ledger", result["job_id"], "--json").stdout)
    assert ledger["tokens_limit"] == cap
    assert 0 < ledger["tokens_used"] <= cap
    # The cap bit: specialists were refused, and say so to the orchestrator.
    assert any(c["status"] == "budget_exceeded" for c in result["children"])
    assert result["status"] != "completed" or result["data"]["reports"][0]["report"].startswith("budget_exceeded:")
