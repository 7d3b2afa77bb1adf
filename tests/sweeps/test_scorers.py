import pytest

from covey.results import AgentResult
from covey.status import AgentStatus
from covey.sweeps.dataset import Sample
from covey.sweeps.scorers import ModelJudge, ScorerSpec


def score(output, target, **spec):
    return ScorerSpec(**spec).build().score(output, Sample(id="s", input="q", target=target))


@pytest.mark.parametrize(
    "spec, output, target, expected",
    [
        ({"kind": "exact"}, " 42\n", 42, 1.0),
        ({"kind": "exact"}, "Paris", "paris", 0.0),
        ({"kind": "exact", "ignore_case": True}, "Paris", "paris", 1.0),
        ({"kind": "includes"}, "the answer is 42.", "42", 1.0),
        ({"kind": "includes"}, "the answer is 41.", "42", 0.0),
        ({"kind": "regex"}, "answer: 42", r"answer:\s*4\d", 1.0),
        ({"kind": "regex", "pattern": r"answer: (\d+)"}, "answer: 42", 42, 1.0),
        ({"kind": "regex", "pattern": r"answer: (\d+)"}, "answer: 43", 42, 0.0),
        ({"kind": "numeric"}, "It is 1,234.", 1234, 1.0),
        ({"kind": "numeric"}, "-33", -33, 1.0),
        ({"kind": "numeric"}, "first 3 then 3.5", "3.5", 1.0),
        ({"kind": "numeric", "tolerance": 0.01}, "3.14159", 3.14, 1.0),
        ({"kind": "numeric"}, "3.14159", 3.14, 0.0),
        ({"kind": "numeric", "relative_tolerance": 0.1}, "105", 100, 1.0),
        ({"kind": "numeric"}, "no number here", 1, 0.0),
        ({"kind": "tests.sweeps.scoring_fixtures:half_credit"}, "got 4", 4, 0.5),
    ],
)
def test_scorers_mark_an_output_against_its_target(spec, output, target, expected):
    assert score(output, target, **spec) == expected


def test_a_missing_output_scores_zero():
    assert score(None, 1, kind="exact") == 0.0


def test_a_numeric_scorer_refuses_a_target_that_is_no_number():
    with pytest.raises(ValueError, match="target 'abc' of sample s is not a number"):
        score("1", "abc", kind="numeric")


def test_a_callable_must_return_a_score_in_range():
    with pytest.raises(ValueError, match="returned 7; expected a bool or a number in"):
        score("x", 1, kind="tests.sweeps.scoring_fixtures:out_of_range")


@pytest.mark.parametrize(
    "kind, message",
    [("fuzzy", "unknown kind 'fuzzy'"), ("tests.sweeps.scoring_fixtures:absent", "has no function 'absent'")],
)
def test_an_unknown_scorer_is_refused_when_built(kind, message):
    with pytest.raises(ValueError, match=message):
        ScorerSpec(kind=kind).build()


def test_the_judge_is_a_single_job_in_the_sweep_scope_reading_a_verdict():
    judge = ScorerSpec(kind="model", model="sim").build()
    assert isinstance(judge, ModelJudge)
    spec = judge.spec(Sample(id="s", input="What is 2 + 2?", target=4), "4", "sw")
    assert spec.strategy == "single" and spec.scopes() == ["global", "sweep:sw"] and spec.model == "sim"
    assert "Reference answer: 4" in spec.task and "Submitted answer: 4" in spec.task
    ok = AgentResult(job_id="j", agent_id="root", status=AgentStatus.COMPLETED, data={"correct": True})
    assert ModelJudge.verdict(ok) == 1.0
    assert ModelJudge.verdict(ok.model_copy(update={"data": {"correct": False}})) == 0.0
    with pytest.raises(ValueError, match="judge failed: boom"):
        ModelJudge.verdict(AgentResult(job_id="j", agent_id="root", status=AgentStatus.FAILED, error="boom"))
