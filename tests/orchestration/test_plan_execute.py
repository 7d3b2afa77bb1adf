import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.models.replies import ModelReply
from covey.orchestration import plan_execute
from covey.orchestration.actions import CallModel, ChildResults, Finish, RunTools, Spawn, ToolResults
from covey.results import AgentResult
from covey.spec import AgentSpec
from covey.status import AgentStatus
from tests.orchestration.checkpointing import resumed

TASK = "What is 6 * 7?"
SPEC = AgentSpec(task=TASK, strategy="plan_execute")
CTX = RunContext(job_id="j", agent_id="root", budget=Budget())
T0 = datetime(2025, 1, 1, tzinfo=UTC)
T1 = datetime(2025, 1, 1, 0, 0, 2, tzinfo=UTC)


def step(step_id, *deps, role=None, tool=None, text="go"):
    return {
        "id": step_id,
        "description": f"do {step_id}",
        "role": role,
        "tool": tool,
        "input": text,
        "depends_on": list(deps),
    }


CALC = step("step_1", tool="calculator", text="6 * 7")
CHECK = step("step_2", "step_1", role="checker", text="Check that {{step_1.result}} answers: What is 6 * 7?")


def planned(*steps):
    body = {"steps": list(steps)}
    return ModelReply(content=json.dumps(body), parsed=body)


def child(status=AgentStatus.COMPLETED, output=None, error=None, agent_id="root-sub-1"):
    return AgentResult(
        job_id="j", agent_id=agent_id, status=status, output=output, error=error, started_at=T0, finished_at=T1
    )


def finished(**results):
    """The children that finished, by step id: what a ``join="each"`` resume hands over."""
    return ChildResults(list(results.values()), list(results))


def resume(action, outcome, spec=SPEC, ctx=CTX):
    """One step, from the state as the worker's checkpoint gives it back."""
    return resumed(plan_execute, spec, ctx, action.state, outcome)


def test_start_asks_the_planner_for_a_plan_without_tools():
    action = plan_execute.start(SPEC, CTX)
    assert isinstance(action, CallModel)
    assert (action.tools, action.schema_name) == ([], "plan")
    tools = action.schema["properties"]["steps"]["items"]["anyOf"][1]["properties"]["tool"]["enum"]
    assert "calculator" in tools and "spawn_agents" not in tools  # the plan may name only the tools it may use
    assert action.messages[1] == {"role": "user", "content": TASK}
    assert "calculator (input: the expression)" in action.messages[0]["content"]
    assert "write_file (input: its arguments as a JSON object)" in action.messages[0]["content"]
    assert "spawn_agents" not in action.messages[0]["content"]


def test_a_plan_runs_step_by_step_and_the_answer_is_synthesised_from_the_results():
    action = resume(plan_execute.start(SPEC, CTX), planned(CALC, CHECK))
    assert isinstance(action, RunTools)
    assert [(c.id, c.name, json.loads(c.arguments)) for c in action.calls] == [
        ("step_1", "calculator", {"expression": "6 * 7"})
    ]

    action = resume(action, ToolResults({"step_1": "42"}, ran={"step_1": (T0, T1)}))
    assert isinstance(action, Spawn) and action.join == "each"
    (request,) = action.children
    assert (request.task, request.role, request.strategy, request.fraction, request.key) == (
        "Check that 42 answers: What is 6 * 7?",
        "checker",
        "react",
        0.5,
        "step_2",
    )
    assert request.instructions == "do step_2"

    action = resume(action, finished(step_2=child(output="42")))
    assert isinstance(action, CallModel)
    assert action.tools == [] and action.schema is None
    assert action.messages[1] == {"role": "user", "content": TASK}
    assert "- step_1 (tool calculator): 42\n- step_2 (role checker): 42" in action.messages[-1]["content"]

    done = resume(action, ModelReply(content="42"))
    assert isinstance(done, Finish) and done.status is AgentStatus.COMPLETED and done.output == "42"
    assert done.data["replans"] == 0 and done.data["errors"] == []
    assert done.data["steps"] == [
        {
            "id": "step_1",
            "role": None,
            "tool": "calculator",
            "status": "completed",
            "input": "6 * 7",
            "output": "42",
            "error": None,
            "agent_id": None,
            "started_at": T0.isoformat(),  # when the worker ran its call
            "finished_at": T1.isoformat(),
        },
        {
            "id": "step_2",
            "role": "checker",
            "tool": None,
            "status": "completed",
            "input": "Check that 42 answers: What is 6 * 7?",
            "output": "42",
            "error": None,
            "agent_id": "root-sub-1",
            "started_at": T0.isoformat(),
            "finished_at": T1.isoformat(),
        },
    ]


def test_ready_steps_run_together_and_split_the_wave_share():
    steps = [
        step("a", role="r1"),
        step("b", role="r2"),
        step("c", tool="calculator", text="1+1"),
        step("d", "a", "b", "c", role="r3", text="{{a.result}} {{b.result}} {{c.result}}"),
    ]
    action = resume(plan_execute.start(SPEC, CTX), planned(*steps))
    assert [c.id for c in action.calls] == ["c"]
    action = resume(action, ToolResults({"c": "2"}))
    assert [(r.role, r.fraction) for r in action.children] == [("r1", 0.25), ("r2", 0.25)]
    action = resume(action, finished(a=child(output="A"), b=child(output="B")))
    assert isinstance(action, Spawn) and [(r.task, r.fraction) for r in action.children] == [("A B 2", 0.5)]


def test_a_step_starts_as_soon_as_its_dependencies_are_done_while_others_run():
    slow, fast = step("slow", role="worker"), step("fast", role="worker")
    after = step("after_fast", "fast", role="worker", text="after {{fast.result}}")
    action = resume(plan_execute.start(SPEC, CTX), planned(slow, fast, after))
    assert isinstance(action, Spawn) and action.join == "each"
    assert [(r.key, r.fraction) for r in action.children] == [("slow", 0.25), ("fast", 0.25)]

    action = resume(action, finished(fast=child(output="F")))
    assert isinstance(action, Spawn) and [(r.key, r.task) for r in action.children] == [("after_fast", "after F")]
    assert action.state.running == ["slow", "after_fast"]

    action = resume(action, finished(after_fast=child(output="A")))
    assert isinstance(action, Spawn) and action.children == []  # waits for slow, dispatching nothing
    action = resume(action, finished(slow=child(output="S")))
    assert isinstance(action, CallModel) and action.schema is None
    assert [r.id for r in action.state.records] == ["fast", "after_fast", "slow"]


def test_a_failed_step_is_replanned_only_once_the_steps_running_beside_it_are_done():
    action = resume(plan_execute.start(SPEC, CTX), planned(step("a", role="r"), step("b", role="r")))
    action = resume(action, finished(a=child(AgentStatus.FAILED, error="boom")))
    assert isinstance(action, Spawn) and action.children == []
    action = resume(action, finished(b=child(output="B")))
    assert isinstance(action, CallModel) and action.schema_name == "plan"
    assert "- a (role r): failed: boom" in action.messages[-1]["content"]
    assert "- b: B" in action.messages[-1]["content"]


def test_a_step_stopped_by_a_deadline_ends_the_agent_while_others_still_run():
    action = resume(plan_execute.start(SPEC, CTX), planned(step("a", role="r"), step("b", role="r")))
    action = resume(action, finished(a=child(AgentStatus.TIMED_OUT, error="deadline passed")))
    assert isinstance(action, Finish) and action.status is AgentStatus.TIMED_OUT
    assert action.error == "step a timed_out: deadline passed"


def test_a_refused_plan_is_sent_back_with_the_cycle_named():
    action = resume(plan_execute.start(SPEC, CTX), planned({**CALC, "depends_on": ["step_2"]}, CHECK))
    assert isinstance(action, CallModel) and action.schema_name == "plan"
    assert action.messages[-1]["role"] == "user"
    assert "cycle: step_1 -> step_2 -> step_1" in action.messages[-1]["content"]
    assert action.messages[-2]["role"] == "assistant"
    action = resume(action, planned(CALC, CHECK))
    assert isinstance(action, RunTools)
    assert action.state.replans == 1
    assert action.state.errors == ["plan refused: cycle: step_1 -> step_2 -> step_1"]


@pytest.mark.parametrize(
    "bad, reason",
    [
        ([step(f"s{i}", role="r") for i in range(3)], "the plan has 3 steps, more than max_steps=2"),
        ([step("a", tool="read_file")], "step a uses tool 'read_file', which this agent may not use"),
    ],
)
def test_refusals_past_max_replans_end_the_agent_failed_saying_why(bad, reason):
    spec = AgentSpec(task=TASK, strategy="plan_execute", options={"max_replans": 1, "max_steps": 2})
    ctx = CTX.model_copy(update={"allow": ["calculator"]})
    action = resume(plan_execute.start(spec, ctx), planned(*bad), spec, ctx)
    action = resume(action, planned(*bad), spec, ctx)
    assert isinstance(action, Finish) and action.status is AgentStatus.FAILED
    assert action.error.startswith(f"plan refused: {reason}")
    assert action.error.endswith("(no replans left of max_replans=1)")
    assert action.data["replans"] == 1 and len(action.data["errors"]) == 2


def test_a_failed_step_is_replanned_keeping_completed_results():
    action = resume(plan_execute.start(SPEC, CTX), planned(CALC, CHECK, step("step_3", "step_2", role="r")))
    action = resume(action, ToolResults({"step_1": "42"}))
    action = resume(action, finished(step_2=child(AgentStatus.FAILED, error="model call failed: HTTP 500")))
    assert isinstance(action, CallModel) and action.schema_name == "plan"
    prompt = action.messages[-1]["content"]
    assert "- step_2 (role checker): failed: model call failed: HTTP 500" in prompt
    assert "- step_1: 42" in prompt and "Steps that did not run: step_3." in prompt

    action = resume(action, planned(CHECK))  # step_2 again, leaning on the completed step_1
    assert isinstance(action, Spawn) and action.children[0].task == "Check that 42 answers: What is 6 * 7?"
    action = resume(action, finished(step_2=child(output="42", agent_id="root-sub-2")))
    done = resume(action, ModelReply(content="42"))
    assert done.status is AgentStatus.COMPLETED
    assert [(r["id"], r["status"]) for r in done.data["steps"]] == [
        ("step_1", "completed"),
        ("step_2", "failed"),
        ("step_2", "completed"),
    ]
    assert done.data["replans"] == 1
    assert done.data["errors"] == ["step step_2 failed: model call failed: HTTP 500"]


def test_a_replan_may_not_run_a_completed_step_again():
    action = resume(plan_execute.start(SPEC, CTX), planned(CALC, CHECK))
    action = resume(action, ToolResults({"step_1": "42"}))
    action = resume(action, finished(step_2=child(AgentStatus.FAILED, error="boom")))
    action = resume(action, planned(CALC, CHECK))
    assert isinstance(action, CallModel)
    assert "duplicate step id step_1: a completed step has it" in action.messages[-1]["content"]


def test_an_empty_replan_answers_from_what_completed():
    action = resume(plan_execute.start(SPEC, CTX), planned(CALC, CHECK))
    action = resume(action, ToolResults({"step_1": "42"}))
    action = resume(action, finished(step_2=child(AgentStatus.FAILED, error="boom")))
    action = resume(action, planned())
    assert isinstance(action, CallModel) and action.schema is None
    assert "- step_1 (tool calculator): 42" in action.messages[-1]["content"]


def test_a_tool_error_fails_its_step():
    action = resume(plan_execute.start(SPEC, CTX), planned(step("a", tool="calculator", text="1/0")))
    action = resume(action, ToolResults({"a": "error: division by zero"}))
    assert isinstance(action, CallModel)
    assert "- a (tool calculator): failed: division by zero" in action.messages[-1]["content"]


def test_a_tool_of_several_arguments_takes_the_input_as_its_json_arguments():
    args = '{"path": "notes.md", "content": "{{a.result}}"}'
    action = resume(
        plan_execute.start(SPEC, CTX),
        planned(step("a", tool="calculator", text="2"), step("b", "a", tool="write_file", text=args)),
    )
    action = resume(action, ToolResults({"a": "2"}))
    assert [(c.name, json.loads(c.arguments)) for c in action.calls] == [
        ("write_file", {"path": "notes.md", "content": "2"})
    ]


def test_a_result_spliced_into_json_arguments_is_escaped_and_into_plain_text_is_not():
    args = '{"path": "notes.md", "content": "said: {{a.result}}"}'
    action = resume(
        plan_execute.start(SPEC, CTX),
        planned(
            step("a", role="writer", text="quote"),
            step("b", "a", tool="write_file", text=args),
            step("c", "a", tool="calculator", text="{{a.result}}"),
        ),
    )
    said = 'he said "no"\nand left \\ there'
    action = resume(action, finished(a=child(output=said)))
    assert [(c.name, json.loads(c.arguments)) for c in action.calls] == [
        ("write_file", {"path": "notes.md", "content": f"said: {said}"}),
        ("calculator", {"expression": said}),
    ]


def test_a_step_out_of_budget_ends_the_agent_with_that_status():
    action = resume(plan_execute.start(SPEC, CTX), planned(CALC, CHECK))
    action = resume(action, ToolResults({"step_1": "42"}))
    action = resume(action, finished(step_2=child(AgentStatus.BUDGET_EXCEEDED, error="spawn refused: agent cap")))
    assert isinstance(action, Finish) and action.status is AgentStatus.BUDGET_EXCEEDED
    assert action.error == "step step_2 budget_exceeded: spawn refused: agent cap"
    assert [r["status"] for r in action.data["steps"]] == ["completed", "budget_exceeded"]


def test_without_depth_left_the_planner_is_told_to_use_tools_and_agent_steps_are_refused():
    ctx = CTX.model_copy(update={"budget": Budget(max_depth=0)})
    action = plan_execute.start(SPEC, ctx)
    assert "a role (not available here)" in action.messages[0]["content"]
    action = resume(action, planned(CALC, CHECK), ctx=ctx)
    assert "step step_2 needs an agent, but this agent may not spawn" in action.messages[-1]["content"]


def test_audit_records_cut_long_texts():
    long = "x" * 1000
    action = resume(plan_execute.start(SPEC, CTX), planned(step("a", role="r", text=long)))
    action = resume(action, finished(a=child(output=long)))
    assert action.state.results["a"] == long  # kept whole for references
    (record,) = action.state.records
    assert len(record.input) == len(record.output) == plan_execute.AUDIT_CHARS
    assert record.output.endswith("…")


@pytest.mark.parametrize(
    "options, field",
    [
        ({"max_replans": -1}, "options.max_replans"),
        ({"max_steps": 0}, "options.max_steps"),
        ({"wave_share": 1.5}, "options.wave_share"),
        ({"replans": 2}, "options.replans"),
    ],
)
def test_bad_options_are_refused_naming_the_field(options, field):
    with pytest.raises(ValidationError, match=field):
        AgentSpec(task=TASK, strategy="plan_execute", options=options)
