import pytest

from covey.context import RunContext
from covey.budgets.budget import Budget
from covey.spec import InvalidSpec, JobSpec


@pytest.mark.parametrize(
    "data, field",
    [
        ({"task": "x", "budget": {"max_tokens": -5}}, "budget.max_tokens"),
        ({"task": "x", "strategy": "nope"}, "strategy"),
        ({"task": ""}, "task"),
        ({}, "task"),
        ({"task": "x", "budget": {"max_depth": "deep"}}, "budget.max_depth"),
        ({"task": "x", "tools": ["rm_rf"]}, "tools"),
        ({"task": "x", "surprise": 1}, "surprise"),
        ({"task": "x", "tenant": "a b"}, "tenant"),
    ],
)
def test_bad_specs_are_refused_naming_the_field(data, field):
    with pytest.raises(InvalidSpec) as e:
        JobSpec.parse(data)
    assert f"{field}:" in str(e.value)


def test_scopes_add_the_tenant():
    assert JobSpec.parse({"task": "x", "tenant": "acme"}).scopes() == ["global", "tenant:acme"]
    assert JobSpec.parse({"task": "x"}).scopes() == ["global"]


def test_child_context_inherits_deny_and_resets_allow():
    root = RunContext(job_id="j", agent_id="root", budget=Budget(max_depth=2), deny=["write_file"], allow=["calculator"])
    child = root.child("root-sub-1", Budget(max_depth=1), allow=None)
    assert child.deny == ["write_file"]
    assert child.allow is None
    assert child.ancestors == ["root"] and child.chain == ["root", "root-sub-1"]
    assert child.subroot == ".sub_agents/root-sub-1" and child.depth == 1
