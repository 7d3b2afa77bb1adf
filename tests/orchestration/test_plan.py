import pytest

from covey.orchestration import plan
from covey.orchestration.plan import Limits, Step

LIMITS = Limits(max_steps=8, tools=frozenset({"calculator"}))


def step(step_id, *deps, role="worker", tool=None, text="go"):
    return {
        "id": step_id,
        "description": "",
        "role": None if tool else role,
        "tool": tool,
        "input": text,
        "depends_on": list(deps),
    }


def test_a_valid_plan_becomes_steps_in_order():
    steps = plan.validate([step("a", tool="calculator", text="1+1"), step("b", "a", text="{{a.result}}")], LIMITS)
    assert [(s.id, s.tool, s.role, s.depends_on) for s in steps] == [
        ("a", "calculator", None, ()),
        ("b", None, "worker", ("a",)),
    ]


@pytest.mark.parametrize(
    "raw, error, message",
    [
        ([step("a"), step("a")], plan.DuplicateStep, "duplicate step id a"),
        ([step("a", "ghost")], plan.UnknownDependency, "step a depends on unknown step ghost"),
        ([step("a", "b"), step("b", "a")], plan.PlanCycle, "cycle: a -> b -> a"),
        ([step("a", "a")], plan.PlanCycle, "cycle: a -> a"),
        ([step("x"), step("a", "c"), step("b", "a"), step("c", "b", "x")], plan.PlanCycle, "cycle: a -> c -> b -> a"),
        ([step(f"s{i}") for i in range(9)], plan.TooManySteps, "the plan has 9 steps, more than max_steps=8"),
        ([], plan.EmptyPlan, "the plan has no steps"),
        ([step("a", tool="write_file")], plan.BadStep, "step a uses tool 'write_file', which this agent may not use"),
        ([{**step("a"), "tool": "calculator"}], plan.BadStep, "step a must name exactly one of a role and a tool"),
        ([{**step("a"), "role": "  "}], plan.BadStep, "step a must name exactly one of a role and a tool"),
        ([step("a", text="{{b.result}}")], plan.UnknownReference, "step a references unknown step b"),
        ([step("a", text="{{b.result}}"), step("b")], plan.UnknownReference, "step a references b, which it does not"),
    ],
)
def test_a_bad_plan_is_refused_naming_the_steps_at_fault(raw, error, message):
    with pytest.raises(error) as caught:
        plan.validate(raw, LIMITS)
    assert str(caught.value).startswith(message)
    assert isinstance(caught.value, plan.PlanError)


def test_a_reference_may_reach_a_step_it_depends_on_indirectly_or_a_completed_one():
    raw = [step("a"), step("b", "a"), step("c", "b", text="{{a.result}} and {{done.result}}")]
    assert [s.id for s in plan.validate(raw, LIMITS, completed=["done"])] == ["a", "b", "c"]


def test_a_replan_may_depend_on_completed_steps_but_not_reuse_their_ids():
    assert plan.validate([step("b", "a")], LIMITS, completed=["a"])[0].depends_on == ("a",)
    with pytest.raises(plan.DuplicateStep, match="duplicate step id a: a completed step has it"):
        plan.validate([step("a")], LIMITS, completed=["a"])


def test_an_empty_replan_is_nothing_left_to_do():
    assert plan.validate([], LIMITS, completed=["a"]) == []


def test_agent_steps_are_refused_where_the_agent_may_not_spawn():
    with pytest.raises(plan.BadStep, match="step a needs an agent, but this agent may not spawn"):
        plan.validate([step("a")], Limits(max_steps=8, tools=frozenset(), agents=False))


def test_a_long_role_is_cut_to_what_an_agent_spec_takes():
    (only,) = plan.validate([step("a", role="r" * 100)], LIMITS)
    assert only.role == "r" * plan.ROLE_CHARS


def test_ready_steps_are_those_whose_dependencies_are_done():
    steps = [Step(id="a"), Step(id="b", depends_on=["a"]), Step(id="c"), Step(id="d", depends_on=["b", "c"])]
    assert [s.id for s in plan.ready(steps, [])] == ["a", "c"]
    assert [s.id for s in plan.ready(steps, ["a", "c"])] == ["b"]
    assert [s.id for s in plan.ready(steps, ["a", "b", "c", "d"])] == []


def test_references_resolve_to_results():
    text = "Check {{step_1.result}} against {{ step_2.result }}, not {{step_1}}"
    assert plan.references(text) == ["step_1", "step_2"]
    assert plan.resolve(text, {"step_1": "42", "step_2": "6*7"}) == "Check 42 against 6*7, not {{step_1}}"


def test_a_result_holding_braces_is_spliced_as_is():
    assert plan.resolve("{{a.result}}", {"a": r"{{b.result}} \1"}) == r"{{b.result}} \1"


def test_resolving_an_unknown_reference_names_it():
    with pytest.raises(plan.UnknownReference, match="reference to ghost, which has no result"):
        plan.resolve("{{a.result}} {{ghost.result}}", {"a": "1"})


def _schema_misses(body, schema):
    import jsonschema

    return [error.message for error in jsonschema.Draft202012Validator(schema).iter_errors(body)]


def test_the_plan_schema_holds_what_validate_would_refuse_and_takes_a_valid_plan():
    schema = plan.schema(LIMITS)
    good = {"steps": [step("a", tool="calculator", text="1+1"), step("b", "a", text="{{a.result}}")]}
    assert _schema_misses(good, schema) == []
    both = step("a", text="1+1") | {"tool": "calculator"}
    for bad in (
        {"steps": [both]},  # a role and a tool
        {"steps": [step("a", tool="read_file")]},  # a tool this agent may not use
        {"steps": [step(f"s{i}") for i in range(9)]},  # more than max_steps
        {"steps": []},  # nothing planned, nothing done
        {"steps": [step("a", text="x" * (plan.INPUT_CHARS + 1))]},  # a string without end
        {"steps": [step("a", "items:integer")]},  # a dependency that is no id
        {"steps": [step("a", text="")]},  # an agent with no task
    ):
        assert _schema_misses(bad, schema), bad


def test_a_replan_may_be_empty_and_depend_on_completed_steps_and_offers_only_what_may_run():
    schema = plan.schema(Limits(max_steps=2, tools=frozenset(), agents=True), completed=["a", "b"])
    assert _schema_misses({"steps": []}, schema) == []
    assert _schema_misses({"steps": [step("c", "a", "b", "d")]}, schema) == []
    assert _schema_misses({"steps": [step("c", tool="calculator")]}, schema)  # no tools here: agents alone
    tools_only = plan.schema(Limits(max_steps=2, tools=frozenset({"calculator"}), agents=False))
    assert _schema_misses({"steps": [step("a")]}, tools_only)  # no agents below the depth cap


def test_a_one_step_plan_has_no_dependency_to_get_wrong():
    schema = plan.schema(Limits(max_steps=1, tools=frozenset()))
    assert _schema_misses({"steps": [step("a")]}, schema) == []
    assert _schema_misses({"steps": [step("a", "a")]}, schema)  # on itself: no id is left to depend on
