import json

import httpx2
import jsonschema
import openai
import pytest

from covey.models.sim.directives import DirectiveError, parse
from covey.models.sim.handler import transport
from covey.models.sim.scripted import SCRIPTS, Prompt
from covey.models.sim.structured import Answers
from covey.orchestration import plan
from covey.orchestration.plan import Limits

LIMITS = Limits(max_steps=8, tools=frozenset({"calculator", "write_file"}))
SCHEMA = plan.schema(LIMITS)
REPLAN = "Your plan was refused: ... Send a corrected plan."


def planned(task, last=None):
    directives = parse(task)
    prompt = Prompt(task, task if last is None else last, directives, Answers("text", directives.result, 0.5), SCHEMA)
    body = SCRIPTS["plan"](prompt)
    jsonschema.validate(body, SCHEMA)
    return body["steps"]


def test_arithmetic_is_a_calculator_step_then_a_checker_referencing_it():
    steps = planned("What is 6 * 7?")
    assert [(s["id"], s["tool"], s["role"], s["input"], s["depends_on"]) for s in steps] == [
        ("step_1", "calculator", None, "6 * 7", []),
        ("step_2", None, "checker", "Check that {{step_1.result}} answers: What is 6 * 7?", ["step_1"]),
    ]
    assert [s.id for s in plan.validate(steps, LIMITS)] == ["step_1", "step_2"]


def test_any_other_task_is_one_worker_given_the_task():
    assert [(s["id"], s["role"], s["input"]) for s in planned("write a haiku")] == [
        ("step_1", "worker", "write a haiku")
    ]


def test_cycle_makes_the_first_plan_cyclic_and_the_replan_valid():
    task = "[sim:plan cycle] What is 6 * 7?"
    with pytest.raises(plan.PlanCycle, match="cycle: step_1 -> step_2 -> step_1"):
        plan.validate(planned(task), LIMITS)
    assert planned(task, last=REPLAN) == planned("What is 6 * 7?")


def test_cycle_on_a_one_step_plan_is_a_step_on_itself():
    with pytest.raises(plan.PlanCycle, match="cycle: step_1 -> step_1"):
        plan.validate(planned("[sim:plan cycle] write"), LIMITS)


def test_fail_makes_the_first_plans_agent_steps_fail_and_the_replan_retries_only_them():
    task = "[sim:plan fail] What is 6 * 7?"
    first = planned(task)
    assert first[0]["input"] == "6 * 7"
    assert first[1]["input"].endswith("What is 6 * 7? [sim:fail 500]")
    assert parse(first[1]["input"]).fail == "500"
    replan = planned(task, last="Steps failed: ...")
    assert replan == planned("What is 6 * 7?")[1:]
    assert plan.validate(replan, LIMITS, completed=["step_1"])[0].depends_on == ("step_1",)


def test_an_unknown_scenario_fails_loudly():
    with pytest.raises(DirectiveError, match=r"\[sim:plan typo\]: expected cycle, fail, write, race or nothing"):
        planned("[sim:plan typo] What is 1 + 1?")


def test_the_sim_answers_a_plan_schema_call_with_the_script():
    http = httpx2.Client(transport=transport())
    client = openai.OpenAI(api_key="sim", base_url="http://sim.covey/v1", http_client=http, max_retries=0)
    response = client.chat.completions.create(
        model="sim",
        messages=[{"role": "user", "content": "What is 2 + 3?"}],
        response_format={"type": "json_schema", "json_schema": {"name": "plan", "schema": SCHEMA}},
    )
    steps = json.loads(response.choices[0].message.content)["steps"]
    assert steps[0]["input"] == "2 + 3" and steps[1]["role"] == "checker"


def test_write_makes_the_first_plan_a_write_file_step_given_a_json_list_and_the_replan_usual():
    task = "[sim:plan write] What is 6 * 7?"
    (step,) = planned(task)
    assert (step["tool"], json.loads(step["input"])) == ("write_file", ["notes.md", task])
    assert planned(task, last="Steps failed: ...") == planned("What is 6 * 7?")


def test_race_plans_a_slow_step_and_a_step_that_needs_only_the_fast_one():
    steps = planned("[sim:plan race] go")
    assert [(s["id"], s["depends_on"]) for s in steps] == [("slow", []), ("fast", []), ("after_fast", ["fast"])]
    assert "[sim:latency 1500]" in steps[0]["input"] and "[sim:latency" not in steps[1]["input"]
    assert plan.validate(steps, Limits(max_steps=8, tools=frozenset()), {})  # a plan the strategy runs
