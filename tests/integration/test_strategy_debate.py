"""debate end to end: the real CLI, client, worker and Redis, on the sim."""

from __future__ import annotations

from collections import Counter

from covey.status import AgentStatus
from tests.integration.test_jobs import run_json


def roles_by_depth(client, job_id):
    return Counter((n.role, n.depth) for n in client.job(job_id).tree())


def test_debaters_who_agree_at_once_are_critiqued_once_and_never_revise(cli, client):
    proc, result = run_json(cli, "What is 17 * 3?", "--strategy", "debate")
    assert proc.returncode == 0, proc.stderr
    assert (result["status"], result["output"], result["data"]["consensus"]) == ("completed", "51", True)
    assert (len(result["data"]["rounds"]), result["data"]["revisions"]) == (1, [])
    assert result["usage"]["agents"] == 6  # 3 proposers, 3 critics: consensus ends it
    assert roles_by_depth(client, result["job_id"]) == {("root", 0): 1, ("proposer", 1): 3, ("critic", 1): 3}


def test_a_debate_that_agrees_after_one_revision_runs_no_further_round(cli, client):
    proc, result = run_json(
        cli,
        "What is 6 * 7? [sim:debate revise]",
        "--strategy",
        "debate",
        "--option",
        "num_debaters=2",
        "--option",
        "num_rounds=5",
    )
    assert proc.returncode == 0, proc.stderr
    data = result["data"]
    assert (result["output"], data["consensus"]) == ("42", True)
    assert [p["answer"] for p in data["proposals"].values()] == ["42", "42"]
    changed = "took the others' critique"
    assert data["revisions"] == [
        {
            "0": {"answer": "42", "confidence": 0.9, "changed": changed},
            "1": {"answer": "42", "confidence": 0.85, "changed": changed},
        }
    ]
    assert len(data["rounds"]) == 2
    assert result["usage"]["agents"] == 8  # 2 proposals, 2 critiques, 2 revisions, 2 critiques; 5 rounds allowed
    assert roles_by_depth(client, result["job_id"]) == {
        ("root", 0): 1,
        ("proposer", 1): 2,
        ("critic", 1): 4,
        ("reviser", 1): 2,
    }


def test_score_mode_scores_the_same_proposals_every_round(cli, client):
    proc, result = run_json(cli, "What is 17 * 3?", "--strategy", "debate", "--option", "mode=score")
    assert proc.returncode == 0, proc.stderr
    assert (result["status"], result["output"]) == ("completed", "51")
    data = result["data"]
    assert (data["consensus"], data["winner"], data["proposal"]["answer"]) == (True, 0, "51")
    assert data["combined"] == {"0": 0.9, "1": 0.885, "2": 0.87}
    assert len(data["rounds"]) == 2 and data["dropped"] == {}
    assert data["rounds"][1]["scores"]["2"] == {"0": 0.9, "1": 0.9}
    assert result["usage"]["agents"] == 9  # 3 debaters * (1 proposal + 2 critique rounds)
    assert roles_by_depth(client, result["job_id"]) == {("root", 0): 1, ("proposer", 1): 3, ("critic", 1): 6}
    assert {n.status for n in client.job(result["job_id"]).tree()} == {"completed"}


def test_a_split_debate_reports_no_consensus_with_its_scores(client):
    options = {"num_debaters": 4, "num_rounds": 1, "mode": "score"}
    handle = client.submit(client.spec("What is 6 * 7? [sim:debate split]", strategy="debate", options=options))
    result = handle.result(timeout=120)
    assert result.ok, result.error
    assert result.output == "42"  # debater 0, surest of the four, wins without consensus
    assert (result.data["consensus"], result.data["winner"]) == (False, 0)
    assert [p["answer"] for p in result.data["proposals"].values()] == ["42", "43", "44", "45"]
    (scores,) = [r["scores"] for r in result.data["rounds"]]
    assert scores["3"] == {"0": 0.1, "1": 0.1, "2": 0.1}
    assert result.data["combined"]["0"] == 0.34
    assert roles_by_depth(client, handle.id) == {("root", 0): 1, ("proposer", 1): 4, ("critic", 1): 4}


def test_a_failing_debater_drops_out_and_the_others_decide(client):
    spec = client.spec("What is 2 + 2? [sim:fail 500 part=2]", strategy="debate", options={"num_rounds": 1})
    result = client.submit(spec).result(timeout=120)
    assert (result.status, result.output, result.data["consensus"]) == (AgentStatus.COMPLETED, "4", True)
    assert result.data["dropped"]["1"].startswith("failed: model call failed: HTTP 500")
    assert set(result.data["combined"]) == {"0", "2"}
    assert result.usage.agents == 5  # 3 proposers, then 2 critics


def test_a_tight_token_cap_is_never_overspent(cli, client):
    # Each proposer may spend an 18th of the cap (three debaters, six waves): enough
    # for its prompt (about 220 tokens) and a useful reply, too little for a 500-token
    # one, so every reply is cut and the debate fails.
    cap = 6000
    proc, result = run_json(cli, "What is 9 - 4? [sim:tokens 500]", "--strategy", "debate", "--max-tokens", str(cap))
    assert (proc.returncode, result["status"]) == (1, "failed")
    assert result["error"].startswith("no debater proposed an answer: debater 0 budget_exceeded:")
    assert 0 < client.job(result["job_id"]).ledger().tokens_used <= cap
    assert roles_by_depth(client, result["job_id"]) == {("root", 0): 1, ("proposer", 1): 3}
