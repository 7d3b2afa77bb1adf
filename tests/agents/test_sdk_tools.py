"""An Agents SDK agent's function tools as covey serves them, and as the SDK calls them outside covey."""

from __future__ import annotations

import asyncio

import pytest
from agents.tool_context import ToolContext as SdkToolContext

from covey import keys
from covey.agents import brought
from covey.agents.loading import AgentNotFound
from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.models.replies import ToolCall
from covey.store.workspace import Workspace
from covey.worker.tools import run_tool

TRIAGE = "covey_example_agents.triage:triage"


def test_every_function_tool_reachable_through_handoffs_is_served_under_its_name_with_its_schema():
    served = brought.brought(TRIAGE).tools
    assert sorted(served) == ["lookup_order", "refund"]  # the as_tool agents' calls are children, not tools
    assert sorted(brought.brought(TRIAGE).agents) == ["ask_policy", "translate"]
    lookup = served["lookup_order"]
    assert lookup.parameters["properties"].keys() == {"order_id"} and lookup.origin == f"agent {TRIAGE}"


def test_a_call_runs_through_covey_s_tool_path_with_its_arguments_checked(redis_client):
    ctx = RunContext(job_id="j", agent_id="root", budget=Budget())
    workspace = Workspace(redis_client, "j", keys.DEFAULT_JOB_TTL_SECONDS)
    own = brought.brought(TRIAGE).tools
    ok = run_tool(ToolCall("c1", "lookup_order", '{"order_id": "A1"}'), ctx, workspace, None, own)
    assert ok == "shipped on Monday"
    bad = run_tool(ToolCall("c2", "lookup_order", '{"order": "A1"}'), ctx, workspace, None, own)
    assert bad.startswith("error:") and "order_id" in bad


def test_outside_a_covey_run_a_wrapped_tool_runs_as_the_sdk_calls_it():
    from covey_example_agents.triage import lookup_order

    brought.brought(TRIAGE)  # wrapped for replay in this process
    context = SdkToolContext(context=None, tool_name="lookup_order", tool_call_id="c", tool_arguments="{}")
    assert asyncio.run(lookup_order.on_invoke_tool(context, '{"order_id": "B2"}')) == "waiting for stock"


def test_two_different_tools_of_one_name_are_refused_naming_it():
    with pytest.raises(AgentNotFound, match="two different function tools are named 'tally'"):
        brought.brought("tests.agents.sdk_agents:clashing")
