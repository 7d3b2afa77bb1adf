"""Which tool calls wait for a person: the spec's patterns, the tool's flag, or its
predicate over the call's arguments; a predicate that fails asks a person."""

from __future__ import annotations

import pytest

from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.models.replies import ToolCall
from covey.spec import AgentSpec
from covey.tools import registry
from covey.tools.function import tool
from covey.worker.agent_state import AgentState
from covey.worker.approvals import required


@tool(needs_approval=lambda arguments: arguments["amount"] > 100)
def pay(amount: int) -> str:
    """Pay."""
    return "paid"


@tool(needs_approval=True)
def wipe(path: str) -> str:
    """Wipe."""
    return "wiped"


@pytest.fixture(autouse=True)
def served(monkeypatch):
    monkeypatch.setattr(registry, "_served", dict(registry._served))
    monkeypatch.setattr(registry, "_loaded", False)
    registry.add([pay, wipe])


def agent(*approve: str) -> AgentState:
    ctx = RunContext(job_id="j", agent_id="root", budget=Budget())
    return AgentState.model_construct(ctx=ctx, spec=AgentSpec(task="t", approve=list(approve)))


def call(name: str, arguments: str) -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=arguments)


def test_a_call_waits_when_its_tool_or_the_spec_says_so():
    assert required(agent(), call("wipe", '{"path": "/"}'))
    assert not required(agent(), call("calculator", '{"expression": "1+1"}'))
    assert required(agent("calc*"), call("calculator", '{"expression": "1+1"}'))
    assert required(agent(), call("pay", '{"amount": 500}'))
    assert not required(agent(), call("pay", '{"amount": 5}'))


def test_a_predicate_that_cannot_judge_a_call_leaves_it_to_a_person():
    assert required(agent(), call("pay", '{"sum": 500}'))  # KeyError in the predicate
    assert required(agent(), call("pay", "not json"))
