"""lats through the real CLI, client, worker and Redis."""

from __future__ import annotations

import json

from covey.status import AgentStatus
from covey.tools.builtin import SPAWN_TOOLS


def run_lats(client, task: str, budget: dict | None = None, **options):
    handle = client.submit(client.spec(task, strategy="lats", options=options, budget=budget or {}))
    return handle, handle.result(timeout=120)


def test_it_answers_the_right_number_through_its_evaluators(cli, client):
    proc = cli("run", "What is 17 * 3?", "--strategy", "lats", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["status"], result["output"]) == ("completed", "51")
    assert result["data"]["solved"] is True and result["data"]["simulations"] == 1
    assert result["data"]["path"] == ["compute 17 * 3 directly"]

    assert result["data"]["executed"]["status"] == "completed"

    nodes = client.job(result["job_id"]).tree()
    assert sorted((n.depth, n.role, n.status) for n in nodes) == [
        (0, "root", "completed"),
        *[(1, "evaluator", "completed")] * 3,
        (1, "executor", "completed"),
    ]
    assert all(n.parent_id == "root" for n in nodes if n.depth == 1)
    evaluators = [n for n in nodes if n.role == "evaluator"]
    assert {n.data["answer"] for n in evaluators} == {"51", "50", ""}
    # Each evaluator carried its path out: it called the calculator before it judged,
    # as its transcript shows.
    assert [n.usage.tool_calls for n in evaluators] == [1, 1, 1]
    for n in evaluators:
        transcript = client.job(result["job_id"]).transcript(n.agent_id)
        assert transcript is not None
        assert [e.tool for e in transcript.events if e.kind == "tool"] == ["calculator"]
    assert all(n.usage.cycles == 2 for n in evaluators)
    (executor,) = [n for n in nodes if n.role == "executor"]
    assert (executor.output, executor.usage.tool_calls) == ("51", 1)
    rows = [row for row in client.job(result["job_id"]).ledger().agents if row.depth == 1]
    assert len(rows) == 4 and all(row.tools and not SPAWN_TOOLS & set(row.tools) for row in rows)  # can_spawn=false
    assert "calculator" in rows[0].tools


def test_single_evaluators_judge_without_acting(client):
    handle, result = run_lats(client, "What is 17 * 3?", evaluator_strategy="single", execute_best=False)
    assert (result.status, result.output) == (AgentStatus.COMPLETED, "51")
    evaluators = [n for n in handle.tree() if n.depth == 1]
    assert len(evaluators) == 3 and {(n.role, n.usage.tool_calls) for n in evaluators} == {("evaluator", 0)}


def test_an_unsolvable_search_stops_after_exactly_num_simulations(client):
    handle, result = run_lats(client, "[sim:lats solve=99] What is 17 * 3?", num_simulations=3)
    assert result.status is AgentStatus.COMPLETED
    assert (result.data["simulations"], result.data["solved"]) == (3, False)
    assert result.output == result.data["answer"] == "51"  # the best leaf still computes it
    assert len(result.data["tree"]) == 1 + 9
    evaluators = [n for n in handle.tree() if n.role == "evaluator"]
    assert len(evaluators) == 9 and {n.depth for n in evaluators} == {1}
    assert handle.ledger().agents_spawned == 10  # and the executor


def test_under_a_tight_token_cap_refused_simulations_score_neutral_and_the_cap_holds(client):
    cap = 2000  # funds the expansions and most evaluators, not all of them
    handle, result = run_lats(client, "[sim:lats solve=99] What is 17 * 3?", budget={"max_tokens": cap})
    assert 0 < handle.ledger().tokens_used <= cap
    assert result.data is not None, result.error
    noted = [node for node in result.data["tree"] if node["note"]]
    assert noted and len(noted) == len(result.data["notes"])
    assert all(node["score"] == 0.5 and "not evaluated (budget_exceeded" in node["note"] for node in noted)
    if result.status is AgentStatus.COMPLETED:
        assert result.output == "51"


def test_a_wave_refused_whole_for_budget_ends_the_search(client):
    cap = 700  # funds one expansion, no evaluator
    handle, result = run_lats(client, "What is 17 * 3?", budget={"max_tokens": cap}, num_simulations=3)
    assert 0 < handle.ledger().tokens_used <= cap
    assert result.status is AgentStatus.BUDGET_EXCEEDED
    assert result.error.startswith("no candidate was evaluated")
    assert result.data["simulations"] == 1 and len(result.data["notes"]) == 3
    assert {node["score"] for node in result.data["tree"][1:]} == {0.5}
