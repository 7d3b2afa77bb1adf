import re

import pytest

from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.spec import InvalidSpec, JobSpec


@pytest.mark.parametrize(
    "data, field",
    [
        ({"task": "x", "budget": {"max_tokens": -5}}, "budget.max_tokens"),
        ({"task": "x", "strategy": "nope"}, "strategy"),
        ({"task": ""}, "task"),
        ({}, "task"),
        ({"task": "x", "budget": {"max_depth": "deep"}}, "budget.max_depth"),
        ({"task": "x", "tools": ["rm -rf"]}, "tools"),
        ({"task": "x", "tools": ["x" * 65]}, "tools"),
        ({"task": "x", "surprise": 1}, "surprise"),
        ({"task": "x", "tenant": "a b"}, "tenant"),
    ],
)
def test_bad_specs_are_refused_naming_the_field(data, field):
    with pytest.raises(InvalidSpec) as e:
        JobSpec.parse(data)
    assert f"{field}:" in str(e.value)


def test_any_well_formed_tool_name_is_the_workers_to_judge():
    """The spec cannot know which tools exist: the workers serve them and refuse the rest."""
    spec = JobSpec.parse({"task": "x", "tools": ["lookup_weather", "files__read", "calculator"]})
    assert spec.tools == ["lookup_weather", "files__read", "calculator"]


def test_scopes_add_the_tenant():
    assert JobSpec.parse({"task": "x", "tenant": "acme"}).scopes() == ["global", "tenant:acme"]
    assert JobSpec.parse({"task": "x"}).scopes() == ["global"]


def test_child_context_inherits_deny_and_resets_allow():
    root = RunContext(
        job_id="j", agent_id="root", budget=Budget(max_depth=2), deny=["write_file"], allow=["calculator"]
    )
    child = root.child("root-sub-1", Budget(max_depth=1), allow=None)
    assert child.deny == ["write_file"]
    assert child.allow is None
    assert child.ancestors == ["root"] and child.chain == ["root", "root-sub-1"]
    assert child.subroot == ".sub_agents/root-sub-1" and child.depth == 1


def test_with_defaults_fills_only_what_was_left_unset():
    defaults = Budget(max_tokens=100, max_cycles=10, max_agents=5, max_depth=2)
    spec = JobSpec.parse({"task": "x", "budget": {"max_tokens": 7, "max_agents": None}})
    done = spec.with_defaults("gpt-x", defaults)
    assert done.budget == Budget(max_tokens=7, max_cycles=10, max_agents=None, max_depth=2)
    assert done.model == "gpt-x"
    assert JobSpec.parse({"task": "x", "model": "sim"}).with_defaults("gpt-x", defaults).model == "sim"
    assert JobSpec.parse({"task": "x"}).with_defaults("sim", defaults).budget == defaults


def test_the_wire_form_carries_only_what_was_set():
    spec = JobSpec.parse({"task": "x", "budget": {"max_tokens": 7}})
    assert spec.wire() == {"task": "x", "budget": {"max_tokens": 7}}


@pytest.mark.parametrize(
    "data, message",
    [
        ({"task": "x", "options": {"depth": 3}}, "options.depth: Extra inputs are not permitted"),
        ({"task": "x", "strategy": "single", "options": {"schema": {"type": "mystery"}}}, "options.schema:"),
        ({"task": "x", "strategy": "single", "options": {"schema": "json"}}, "options.schema:"),
    ],
)
def test_options_are_checked_by_their_strategy_naming_the_field(data, message):
    with pytest.raises(InvalidSpec, match=message):
        JobSpec.parse(data)


def test_a_valid_single_schema_is_kept():
    schema = {"type": "object", "properties": {"score": {"type": "number"}}}
    spec = JobSpec.parse({"task": "x", "strategy": "single", "options": {"schema": schema}})
    assert spec.options == {"schema": schema}


def test_the_per_call_cap_defaults_to_what_current_models_take():
    assert JobSpec.parse({"task": "x"}).max_call_tokens == 4096


def test_a_strategy_this_install_lacks_is_refused_unless_the_workers_decide():
    with pytest.raises(InvalidSpec, match="unknown strategy 'beam'; known: "):
        JobSpec.parse({"task": "t", "strategy": "beam", "options": {"width": 3}})
    spec = JobSpec.parse({"task": "t", "strategy": "beam", "options": {"width": 3}}, workers_decide=True)
    assert (spec.strategy, spec.options) == ("beam", {"width": 3})  # for Client.check, against what workers publish
    with pytest.raises(InvalidSpec, match="strategy 'no beam!': not a strategy's name"):
        JobSpec.parse({"task": "t", "strategy": "no beam!"}, workers_decide=True)
    with pytest.raises(InvalidSpec, match="options"):  # one it has is checked here, as ever
        JobSpec.parse({"task": "t", "strategy": "debate", "options": {"num_debaters": "many"}}, workers_decide=True)


@pytest.mark.parametrize(
    "value, message",
    [
        (10, "priority: Input should be less than or equal to 9"),
        (-1, "priority: Input should be greater than or equal to 0"),
        ("9", "priority: Input should be a valid integer"),
        (9.0, "priority: Input should be a valid integer"),
        (True, "priority: Input should be a valid integer"),
        (None, "priority: Input should be a valid integer"),
    ],
)
def test_a_priority_is_a_whole_number_from_0_to_9(value, message):
    with pytest.raises(InvalidSpec, match=f"^invalid job spec: {message}"):
        JobSpec.parse({"task": "x", "priority": value})


def test_a_job_is_least_urgent_unless_it_asks_and_sends_its_priority_only_when_asked():
    assert JobSpec.parse({"task": "x"}).priority == 0
    assert "priority" not in JobSpec.parse({"task": "x"}).wire()
    assert JobSpec.parse({"task": "x", "priority": 9}).wire()["priority"] == 9


def test_a_childs_context_carries_its_jobs_priority():
    root = RunContext(job_id="j", agent_id="root", budget=Budget(max_depth=2), priority=7)
    assert root.child("root-sub-1", Budget(max_depth=1), allow=None).priority == 7


def test_a_spec_naming_an_agent_runs_it_with_the_agent_strategy_and_its_path_is_checked_for_form():
    spec = JobSpec.parse({"task": "x", "agent": "mypkg.agents:triage"})
    assert (spec.strategy, spec.agent) == ("agent", "mypkg.agents:triage")
    assert JobSpec.parse(spec.wire()) == spec  # on the wire as sent
    for bad, said in (
        ({"agent": "mypkg.agents"}, "agent: 'mypkg.agents' is not module.path:attribute"),
        ({"agent": "a:b", "strategy": "react"}, "agent and strategy 'agent' go together"),
        ({"strategy": "agent"}, "agent and strategy 'agent' go together"),
    ):
        with pytest.raises(InvalidSpec, match=re.escape(said)):
            JobSpec.parse({"task": "x", **bad})
