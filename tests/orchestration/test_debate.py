"""debate as a pure state machine, driven by hand; and its scoring rules."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.models.replies import ModelReply
from covey.orchestration import debate, debate_scoring
from covey.orchestration.actions import ChildResults, Finish, Spawn
from covey.results import AgentResult
from covey.spec import AgentSpec
from covey.status import AgentStatus
from tests.orchestration.checkpointing import resumed

CTX = RunContext(job_id="j", agent_id="root", budget=Budget())
TASK = "What is 6 * 7? [sim:debate split]"


def spec(**options):
    """A debate that only scores, unless ``mode`` says otherwise."""
    return AgentSpec(task=TASK, strategy="debate", options={"mode": "score", **options})


def proposed(answer="42", confidence=0.9):
    return AgentResult(
        job_id="j",
        agent_id="p",
        role="proposer",
        status=AgentStatus.COMPLETED,
        output=answer,
        data={"answer": answer, "confidence": confidence, "reasoning": "because"},
    )


def critiqued(**scores):
    return AgentResult(
        job_id="j",
        agent_id="c",
        role="critic",
        status=AgentStatus.COMPLETED,
        data={"scores": scores, "reasoning": "compared"},
    )


def broke(status=AgentStatus.FAILED, error="model call failed: HTTP 500"):
    return AgentResult(job_id="j", agent_id="x", status=status, error=error)


def step(the_spec, action, *results):
    """Resume from ``action`` with ``results``, its state as the worker's checkpoint gives it back."""
    return resumed(debate, the_spec, CTX, action.state, ChildResults(list(results)))


# --- the waves ------------------------------------------------------------------


def test_it_starts_with_one_wave_of_proposers_carrying_the_task_and_their_index():
    action = debate.start(spec(), CTX)
    assert isinstance(action, Spawn)
    assert [c.role for c in action.children] == ["proposer"] * 3
    for i, child in enumerate(action.children):
        assert child.strategy == "single" and child.tools == []
        assert child.options == {"schema": debate.PROPOSAL_SCHEMA, "schema_name": "proposal"}
        assert child.task.startswith(f"Debater {i} (of 3, numbered from 0):")
        assert TASK in child.task and child.task.endswith(f"(part {i + 1} of 3)")
        assert child.fraction == pytest.approx(1 / 9)  # 3 children, 3 waves to go


def test_every_debater_critiques_the_others_never_itself():
    the_spec = spec()
    action = step(the_spec, debate.start(the_spec, CTX), proposed(), proposed(), proposed("41"))
    assert isinstance(action, Spawn)
    assert [c.role for c in action.children] == ["critic"] * 3
    for i, child in enumerate(action.children):
        scores = child.options["schema"]["properties"]["scores"]
        assert scores["required"] == [str(t) for t in range(3) if t != i]
        assert child.options["schema_name"] == "critique"
        assert child.task.startswith(f"Debater {i} (of 3, numbered from 0), critique round 1:")
        assert TASK in child.task and '"2": {"answer": "41"' in child.task
        assert "Mean scores" not in child.task
        assert child.fraction == pytest.approx(1 / 6)


def test_the_second_round_shows_the_first_rounds_mean_scores():
    the_spec = spec()
    action = step(the_spec, debate.start(the_spec, CTX), proposed(), proposed(), proposed())
    action = step(
        the_spec,
        action,
        critiqued(**{"1": 1, "2": 0.5}),
        critiqued(**{"0": 0.5, "2": 0.5}),
        critiqued(**{"0": 1, "1": 0.0}),
    )
    assert isinstance(action, Spawn) and len(action.children) == 3
    assert 'Mean scores of round 1 (JSON, by debater index): {"0": 0.75, "1": 0.5, "2": 0.5}' in action.children[0].task
    assert action.children[0].fraction == pytest.approx(1 / 3)


def run(the_spec, proposals, *rounds):
    action = step(the_spec, debate.start(the_spec, CTX), *proposals)
    for critiques in rounds:
        action = step(the_spec, action, *critiques)
    return action


AGREE = [critiqued(**{"1": 0.9, "2": 0.9}), critiqued(**{"0": 0.9, "2": 0.9}), critiqued(**{"0": 0.9, "1": 0.9})]


def test_agreeing_debaters_reach_consensus_and_the_data_holds_every_score():
    done = run(spec(), [proposed(confidence=0.8), proposed(confidence=0.9), proposed(confidence=0.7)], AGREE, AGREE)
    assert isinstance(done, Finish)
    assert (done.status, done.output) == (AgentStatus.COMPLETED, "42")
    data = done.data
    assert (data["consensus"], data["winner"]) == (True, 1)
    assert data["proposal"] == {"answer": "42", "confidence": 0.9, "reasoning": "because"}
    assert data["combined"] == {"0": 0.87, "1": 0.9, "2": 0.84}
    assert data["peer_means"] == {"0": pytest.approx(0.9), "1": pytest.approx(0.9), "2": pytest.approx(0.9)}
    assert len(data["rounds"]) == 2
    assert data["rounds"][0] == {
        "scores": {"0": {"1": 0.9, "2": 0.9}, "1": {"0": 0.9, "2": 0.9}, "2": {"0": 0.9, "1": 0.9}},
        "reasons": {"0": "compared", "1": "compared", "2": "compared"},
        "silent": {},
    }
    assert (data["consensus_threshold"], data["peer_weight"], data["confidence_weight"]) == (0.7, 0.7, 0.3)
    json.dumps(data)  # a JSON value the parent reads as is


def test_low_scores_leave_no_consensus_and_ties_go_to_the_lowest_index():
    low = [critiqued(**{"1": 0.1, "2": 0.1}), critiqued(**{"0": 0.1, "2": 0.1}), critiqued(**{"0": 0.1, "1": 0.1})]
    done = run(spec(num_rounds=1), [proposed("42"), proposed("43"), proposed("44")], low)
    assert (done.status, done.output) == (AgentStatus.COMPLETED, "42")
    assert (done.data["consensus"], done.data["winner"]) == (False, 0)
    assert done.data["combined"] == {"0": 0.34, "1": 0.34, "2": 0.34}


def test_consensus_is_at_or_above_the_threshold():
    # 0.7 * 0.2 + 0.3 * 0.2 is 0.19999999999999998 in floats: rounded, it is the threshold
    scores = [critiqued(**{"1": 0.2}), critiqued(**{"0": 0.2})]
    proposals = [proposed(confidence=0.2), proposed(confidence=0.2)]
    at = run(spec(num_debaters=2, num_rounds=1, consensus_threshold=0.2), proposals, scores)
    assert (at.data["combined"]["0"], at.data["consensus"]) == (0.2, True)
    above = run(spec(num_debaters=2, num_rounds=1, consensus_threshold=0.200001), proposals, scores)
    assert above.data["consensus"] is False


def test_the_weights_are_options():
    scores = [critiqued(**{"1": 0.0}), critiqued(**{"0": 1.0})]
    the_spec = spec(num_debaters=2, num_rounds=1, peer_weight=0.2, confidence_weight=0.8)
    done = run(the_spec, [proposed("a", confidence=0.9), proposed("b", confidence=0.1)], scores)
    assert done.data["combined"] == {"0": 0.92, "1": 0.08}
    assert done.output == "a"


# --- revising -------------------------------------------------------------------


def revised(answer="42", confidence=0.9, changed="took the critique"):
    return AgentResult(
        job_id="j",
        agent_id="r",
        role="reviser",
        status=AgentStatus.COMPLETED,
        data={"answer": answer, "confidence": confidence, "changed": changed},
    )


SPLIT = [critiqued(**{"1": 0.1}), critiqued(**{"0": 0.1})]
AGREED = [critiqued(**{"1": 0.9}), critiqued(**{"0": 0.9})]


def test_without_consensus_each_debater_revises_seeing_the_others_and_the_critiques():
    the_spec = spec(mode="revise", num_debaters=2)
    action = run(the_spec, [proposed("42"), proposed("43")], SPLIT)
    assert isinstance(action, Spawn) and [c.role for c in action.children] == ["reviser"] * 2
    child = action.children[1]
    assert child.options == {"schema": debate.REVISION_SCHEMA, "schema_name": "revision"}
    assert child.task.startswith("Debater 1 (of 2, numbered from 0), revision 1:")
    assert '"0": {"answer": "42"' in child.task and '"1": {"answer": "43"' in child.task
    assert 'Critiques (JSON, by critic index): {"0": {"scores": {"1": 0.1}, "reasoning": "compared"}' in child.task
    assert child.task.endswith("(part 2 of 2)")


def test_revised_answers_are_critiqued_and_consensus_ends_the_debate_at_once():
    the_spec = spec(mode="revise", num_debaters=2, num_rounds=5)
    action = run(the_spec, [proposed("42"), proposed("43")], SPLIT)
    action = step(the_spec, action, revised("42"), revised("42", 0.8))
    assert isinstance(action, Spawn) and [c.role for c in action.children] == ["critic"] * 2
    assert '"1": {"answer": "42", "confidence": 0.8, "reasoning": "took the critique"}' in action.children[0].task
    done = step(the_spec, action, *AGREED)
    assert isinstance(done, Finish) and (done.output, done.data["consensus"]) == ("42", True)
    assert len(done.data["rounds"]) == 2 and len(done.data["revisions"]) == 1
    assert done.data["combined"] == {"0": 0.9, "1": 0.87}  # the latest round's scores alone


def test_consensus_on_the_proposals_needs_no_revision():
    the_spec = spec(mode="revise", num_debaters=2)
    done = run(the_spec, [proposed(), proposed()], AGREED)
    assert isinstance(done, Finish) and done.data["revisions"] == []


def test_revisions_stop_at_num_rounds_and_a_failed_one_keeps_the_answer():
    the_spec = spec(mode="revise", num_debaters=2, num_rounds=1)
    action = run(the_spec, [proposed("42"), proposed("43")], SPLIT)
    action = step(the_spec, action, broke(), revised("44"))
    assert '"0": {"answer": "42"' in action.children[0].task and '"1": {"answer": "44"' in action.children[0].task
    done = step(the_spec, action, *SPLIT)
    assert isinstance(done, Finish) and done.data["consensus"] is False
    assert done.data["revisions"] == [{"1": {"answer": "44", "confidence": 0.9, "changed": "took the critique"}}]


def test_revising_shares_the_budget_over_every_wave_it_may_run():
    the_spec = spec(mode="revise", num_debaters=2, num_rounds=2)
    assert debate.start(the_spec, CTX).children[0].fraction == pytest.approx(1 / 12)  # 2 wide, 6 waves


# --- failures -------------------------------------------------------------------


def test_a_failed_proposer_is_out_of_the_running():
    the_spec = spec(num_rounds=1)
    action = step(the_spec, debate.start(the_spec, CTX), proposed(), broke(), proposed())
    assert [c.task.split(" (of")[0] for c in action.children] == ["Debater 0", "Debater 2"]
    assert action.children[0].options["schema"]["properties"]["scores"]["required"] == ["2"]
    assert '"1":' not in action.children[0].task.split("Proposals")[1]
    done = step(the_spec, action, critiqued(**{"2": 0.9}), critiqued(**{"0": 0.9}))
    assert done.data["dropped"] == {"1": "failed: model call failed: HTTP 500"}
    assert set(done.data["combined"]) == {"0", "2"}


def test_a_failed_or_refused_critic_gives_no_scores_and_says_why():
    refused = broke(AgentStatus.BUDGET_EXCEEDED, "token cap reached")
    done = run(
        spec(num_rounds=1), [proposed(), proposed(), proposed()], [critiqued(**{"1": 0.9, "2": 0.9}), refused, broke()]
    )
    assert done.data["rounds"] == [
        {
            "scores": {"0": {"1": 0.9, "2": 0.9}},
            "reasons": {"0": "compared"},
            "silent": {"1": "budget_exceeded: token cap reached", "2": "failed: model call failed: HTTP 500"},
        }
    ]
    assert done.data["peer_means"] == {"0": 0.0, "1": 0.9, "2": 0.9}


def test_with_one_proposal_left_there_is_no_one_to_critique_it():
    the_spec = spec()
    done = step(the_spec, debate.start(the_spec, CTX), broke(), proposed(confidence=1.0), broke())
    assert isinstance(done, Finish) and done.status is AgentStatus.COMPLETED
    assert (done.output, done.data["winner"], done.data["rounds"]) == ("42", 1, [])
    assert (done.data["combined"], done.data["consensus"]) == ({"1": 0.3}, False)


def test_with_no_proposal_the_debate_fails_saying_why():
    the_spec = spec(num_debaters=2)
    done = step(the_spec, debate.start(the_spec, CTX), broke(), broke(AgentStatus.BUDGET_EXCEEDED, "spawn refused"))
    assert isinstance(done, Finish) and done.status is AgentStatus.FAILED
    assert done.error == (
        "no debater proposed an answer: debater 0 failed: model call failed: HTTP 500; "
        "debater 1 budget_exceeded: spawn refused"
    )


def test_zero_rounds_picks_on_confidence_alone():
    the_spec = spec(num_rounds=0, peer_weight=0, confidence_weight=1)
    done = step(the_spec, debate.start(the_spec, CTX), proposed("a", 0.6), proposed("b", 0.8), proposed("c", 0.8))
    assert (done.output, done.data["winner"], done.data["consensus"]) == ("b", 1, True)


def test_it_resumes_only_from_children():
    with pytest.raises(TypeError):
        debate.resume(spec(), CTX, debate.State(), ModelReply(content="hi"))


# --- options --------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, field",
    [
        ({"num_debaters": 1}, "options.num_debaters"),
        ({"num_debaters": 11}, "options.num_debaters"),
        ({"num_rounds": 6}, "options.num_rounds"),
        ({"consensus_threshold": 1.5}, "options.consensus_threshold"),
        ({"peer_weight": -0.1}, "options.peer_weight"),
        ({"judges": 2}, "options.judges"),
    ],
)
def test_a_bad_option_is_refused_naming_it(options, field):
    with pytest.raises(ValidationError, match=field.replace(".", r"\.")):
        spec(**options)


def test_weights_must_sum_to_one():
    with pytest.raises(ValidationError, match="peer_weight .0.5. and confidence_weight .0.3. must sum to 1"):
        spec(peer_weight=0.5)
    assert debate.Options(peer_weight=0.1, confidence_weight=0.9).peer_weight == 0.1


# --- scoring --------------------------------------------------------------------


def test_valid_scores_keep_numbers_for_others_in_the_running():
    raw = {"0": 0.5, "1": 0.7, "2": "high", "3": True, "4": 1.5, "5": 0.2}
    assert debate_scoring.valid_scores(raw, critic=0, targets=[0, 1, 2, 3, 4]) == {1: 0.7}
    assert debate_scoring.valid_scores(None, critic=0, targets=[1]) == {}


def test_peer_means_ignore_self_scores_and_outsiders():
    rounds = [{0: {0: 1.0, 1: 0.4, 7: 1.0}, 1: {0: 0.2}}, {0: {1: 0.8}}]
    assert debate_scoring.peer_means(rounds, [0, 1, 2]) == {0: 0.2, 1: pytest.approx(0.6), 2: 0.0}


def test_decide_needs_a_proposal():
    with pytest.raises(ValueError):
        debate_scoring.decide([], {}, peer_weight=0.7, confidence_weight=0.3, threshold=0.7)
