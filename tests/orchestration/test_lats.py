"""lats driven by hand: expansion calls, evaluator waves, backpropagation, the end."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.models.replies import ModelReply
from covey.orchestration import lats
from covey.orchestration.actions import CallModel, ChildResults, Finish, Spawn, ToolResults
from covey.results import AgentResult
from covey.spec import AgentSpec, JobSpec
from covey.status import AgentStatus
from tests.orchestration.checkpointing import reloaded, resumed

CTX = RunContext(job_id="j", agent_id="root", budget=Budget())
TASK = "What is 6 * 7?"


def spec(**options):
    """A search that answers its best path's evaluation, unless ``execute_best`` says otherwise."""
    return AgentSpec(task=TASK, strategy="lats", options={"execute_best": False, **options})


def proposed(*candidates: str) -> ModelReply:
    return ModelReply(content=json.dumps({"candidates": list(candidates)}), parsed={"candidates": list(candidates)})


def verdict(score: float, answer: str = "", solved: bool = False, reflection: str = "r") -> AgentResult:
    data = {"score": score, "reflection": reflection, "solved": solved, "answer": answer}
    return AgentResult(
        job_id="j",
        agent_id="root-sub-x",
        role="evaluator",
        depth=1,
        status=AgentStatus.COMPLETED,
        output=json.dumps(data),
        data=data,
    )


def executed(output: str) -> AgentResult:
    return AgentResult(
        job_id="j", agent_id="root-sub-e", role="executor", depth=1, status=AgentStatus.COMPLETED, output=output
    )


def refused(status: AgentStatus = AgentStatus.BUDGET_EXCEEDED, error: str = "token cap reached") -> AgentResult:
    return AgentResult(job_id="j", agent_id="root-sub-x", depth=1, status=status, error=error)


def simulate(s: AgentSpec, action, candidates, results):
    """One simulation from an expansion call: propose, spawn, hand back results."""
    assert isinstance(action, CallModel)
    spawn = resumed(lats, s, CTX, action.state, proposed(*candidates))
    assert isinstance(spawn, Spawn)
    return spawn, resumed(lats, s, CTX, spawn.state, ChildResults(results))


def test_start_asks_once_for_exactly_num_candidates_with_no_tools():
    action = lats.start(spec(num_candidates=4), CTX)
    assert isinstance(action, CallModel)
    assert action.tools == [] and action.schema_name == "lats_candidates"
    items = action.schema["properties"]["candidates"]
    assert (items["minItems"], items["maxItems"]) == (4, 4)
    assert action.messages[1] == {"role": "user", "content": TASK}
    assert "Path:\n(no actions yet)" in action.messages[-1]["content"]
    assert reloaded(spec(num_candidates=4), CTX, action.state) == action.state


def test_each_candidate_gets_an_acting_evaluator_at_one_level_with_the_task_and_its_path():
    s = spec()
    action = lats.start(s, CTX)
    spawn = resumed(lats, s, CTX, action.state, proposed("try a", "try b", "try c"))
    assert isinstance(spawn, Spawn) and len(spawn.children) == 3
    for child, candidate in zip(spawn.children, ["try a", "try b", "try c"]):
        assert (child.strategy, child.role, child.tools) == ("react", "evaluator", None)  # the agent's tools
        assert (child.max_cycles, child.can_spawn) == (4, False)
        assert child.options == {"schema": lats.EVALUATION_SCHEMA, "schema_name": "lats_evaluation"}
        assert child.fraction == pytest.approx(1 / 3)
        assert child.task.startswith(TASK) and child.task.count("Path:\n1. ") == 1
        assert f"Path:\n1. {candidate}\n" in child.task and "simulation 1" in child.task


def test_a_solving_evaluation_above_the_threshold_ends_the_search():
    s = spec()
    _, done = simulate(s, lats.start(s, CTX), ["estimate", "compute"], [verdict(0.4, "40"), verdict(1.0, "42", True)])
    assert isinstance(done, Finish) and done.status is AgentStatus.COMPLETED
    assert done.output == "42"
    data = done.data
    assert (data["answer"], data["solved"], data["simulations"]) == ("42", True, 1)
    assert (data["path"], data["scores"], data["visits"]) == (["compute"], [1.0], [1])
    assert [n["id"] for n in data["tree"]] == [0, 1, 2] and data["tree"][0]["visits"] == 2
    assert data["notes"] == []


def test_a_solving_evaluation_below_the_threshold_does_not_end_it():
    s = spec(success_threshold=0.95)
    _, action = simulate(s, lats.start(s, CTX), ["a", "b"], [verdict(0.9, "42", True), verdict(0.3)])
    assert isinstance(action, CallModel)
    assert "Path:\n1. a\n" in action.messages[-1]["content"]  # node a, expanded next, reflected on
    assert "Reflections:\n- a: r" in action.messages[-1]["content"]


def test_it_runs_exactly_num_simulations_and_answers_the_best_leaf_unsolved():
    s = spec(num_simulations=3, seed=7)
    action = lats.start(s, CTX)
    waves = []
    for _ in range(3):
        spawn, action = simulate(
            s, action, ["compute", "estimate", "restate"], [verdict(1.0, "42"), verdict(0.4, "40"), verdict(0.2)]
        )
        waves.append(spawn)
    assert isinstance(action, Finish) and action.status is AgentStatus.COMPLETED
    data = action.data
    assert (data["simulations"], data["solved"], data["answer"]) == (3, False, "42")
    assert len(data["tree"]) == 1 + 9 and data["tree"][0]["visits"] == 9
    # The second simulation expands node 1 (compute); the third explores node 2 (estimate).
    assert "Path:\n1. compute\n2. compute\n" in waves[1].children[0].task
    assert "Path:\n1. estimate\n2. compute\n" in waves[2].children[0].task
    assert data["path"] == ["compute", "compute"] and data["scores"] == [1.0, 1.0]
    assert data["visits"] == [4, 1]


def test_a_refused_or_failed_evaluator_scores_neutral_with_a_note_and_the_search_goes_on():
    s = spec(num_simulations=1)
    _, done = simulate(
        s,
        lats.start(s, CTX),
        ["a", "b", "c"],
        [refused(), verdict(0.3, "7"), refused(AgentStatus.FAILED, "model call failed: HTTP 500")],
    )
    assert isinstance(done, Finish) and done.status is AgentStatus.COMPLETED
    scores = {n["action"]: n["score"] for n in done.data["tree"][1:]}
    assert scores == {"a": 0.5, "b": 0.3, "c": 0.5}
    assert done.data["tree"][0]["value"] == pytest.approx(1.3)
    assert done.data["notes"] == [
        "'a': not evaluated (budget_exceeded: token cap reached); scored 0.5",
        "'c': not evaluated (failed: model call failed: HTTP 500); scored 0.5",
    ]
    assert done.data["path"] == ["b"] and done.output == "7"  # an evaluated leaf beats a neutral one


def test_a_wave_refused_whole_for_budget_ends_the_search_showing_what_it_did():
    s = spec(num_simulations=3)
    _, done = simulate(s, lats.start(s, CTX), ["a", "b"], [refused(), refused()])
    assert isinstance(done, Finish) and done.status is AgentStatus.BUDGET_EXCEEDED
    assert done.error.startswith("no candidate was evaluated: 'a': not evaluated (budget_exceeded")
    assert done.data["simulations"] == 1 and len(done.data["notes"]) == 2
    assert [n["note"] is not None for n in done.data["tree"]] == [False, True, True]


def test_with_no_candidate_evaluated_for_other_reasons_it_searches_on_then_fails():
    s = spec(num_simulations=2)
    failed = refused(AgentStatus.FAILED, "model call failed: HTTP 500")
    _, action = simulate(s, lats.start(s, CTX), ["a", "b"], [failed, failed])
    assert isinstance(action, CallModel)
    _, done = simulate(s, action, ["c"], [failed])
    assert isinstance(done, Finish) and done.status is AgentStatus.FAILED
    assert done.data["simulations"] == 2 and len(done.data["notes"]) == 3


def test_the_search_stops_early_when_no_leaf_is_left_above_the_depth_cap():
    s = spec(num_simulations=5, max_tree_depth=1)
    _, done = simulate(s, lats.start(s, CTX), ["a", "b"], [verdict(0.2, "x"), verdict(0.6, "y")])
    assert isinstance(done, Finish)
    assert (done.data["simulations"], done.output) == (1, "y")


def test_replaying_a_step_gives_the_same_action():
    s = spec()
    action = lats.start(s, CTX)
    state = reloaded(s, CTX, action.state)
    reply = proposed("a", "b")
    assert lats.resume(s, CTX, state, reply) == lats.resume(s, CTX, state, reply)
    assert state == action.state  # resume never mutates what it was handed
    other = RunContext(job_id="j2", agent_id="root", budget=Budget())
    assert lats.start(s, other).state.seed != action.state.seed
    assert lats.start(spec(seed=3), other).state.seed == 3


def test_the_evaluators_strategy_and_cycles_are_options():
    s = spec(evaluator_strategy="single", evaluator_max_cycles=2)
    spawn = resumed(lats, s, CTX, lats.start(s, CTX).state, proposed("a"))
    assert [(c.strategy, c.max_cycles) for c in spawn.children] == [("single", 2)]


def test_the_best_path_is_carried_out_and_the_executors_answer_is_the_result():
    s = spec(execute_best=True)
    wave, action = simulate(
        s, lats.start(s, CTX), ["estimate", "compute"], [verdict(0.4, "40"), verdict(1.0, "41", True)]
    )
    assert wave.children[0].fraction == pytest.approx(1 / 3)  # a share is left for the executor
    assert isinstance(action, Spawn)
    (executor,) = action.children
    assert (executor.role, executor.strategy, executor.options, executor.can_spawn) == ("executor", "react", {}, False)
    assert executor.max_cycles == 4
    assert executor.task.startswith(TASK) and "Path:\n1. compute\n" in executor.task
    done = resumed(lats, s, CTX, action.state, ChildResults([executed("42")]))
    assert isinstance(done, Finish) and (done.status, done.output) == (AgentStatus.COMPLETED, "42")
    assert done.data["executed"]["status"] == "completed" and done.data["solved"] is True


def test_a_failed_executor_leaves_the_evaluated_answer_and_says_why():
    s = spec(execute_best=True, num_simulations=1)
    _, action = simulate(s, lats.start(s, CTX), ["compute"], [verdict(0.7, "41")])
    done = resumed(lats, s, CTX, action.state, ChildResults([refused(AgentStatus.FAILED, "HTTP 500")]))
    assert isinstance(done, Finish) and (done.status, done.output) == (AgentStatus.COMPLETED, "41")
    assert done.data["executed"] == {"agent_id": "root-sub-x", "status": "failed", "error": "HTTP 500"}


def test_nothing_is_carried_out_when_no_candidate_was_evaluated():
    s = spec(execute_best=True, num_simulations=1)
    _, done = simulate(s, lats.start(s, CTX), ["a"], [refused(AgentStatus.FAILED, "HTTP 500")])
    assert isinstance(done, Finish) and done.status is AgentStatus.FAILED


@pytest.mark.parametrize(
    "options, field",
    [
        ({"evaluator_strategy": "plan_execute"}, "takes no schema option"),
        ({"evaluator_strategy": "nope"}, "unknown strategy 'nope'"),
        ({"evaluator_max_cycles": 0}, "options.evaluator_max_cycles"),
        ({"num_candidates": 0}, "options.num_candidates"),
        ({"num_candidates": 11}, "options.num_candidates"),
        ({"num_simulations": 21}, "options.num_simulations"),
        ({"exploration_weight": -1}, "options.exploration_weight"),
        ({"success_threshold": 1.5}, "options.success_threshold"),
        ({"max_tree_depth": 0}, "options.max_tree_depth"),
        ({"beam": 2}, "options.beam"),
    ],
)
def test_bad_options_are_refused_naming_the_field(options, field):
    with pytest.raises(ValidationError) as caught:
        JobSpec(task=TASK, strategy="lats", options=options)
    assert field in str(caught.value)


def test_it_cannot_resume_from_tool_results():
    s = spec()
    with pytest.raises(TypeError):
        lats.resume(s, CTX, lats.start(s, CTX).state, ToolResults({}))
