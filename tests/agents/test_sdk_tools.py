"""An Agents SDK agent's function tools as covey serves them, and as the SDK calls them outside covey."""

from __future__ import annotations

import asyncio

import pytest
from agents.tool_context import ToolContext as SdkToolContext
from celery.utils import uuid

from covey import keys
from covey.agents import brought
from covey.agents.loading import AgentNotFound
from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.models.replies import ToolCall
from covey.store.workspace import Workspace
from covey.worker.tools import run_tool
from tests.images import png

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


def plotted(redis_client, agent: str, *arguments: str) -> tuple[list[list[str]], Workspace]:
    """The lines of each call of ``agent``'s ``plot`` tool (ids c1, c2, ...) run
    through covey's tool path by a root of a new job, and the job's workspace."""
    job_id = uuid()
    workspace = Workspace(redis_client, job_id, keys.DEFAULT_JOB_TTL_SECONDS)
    ctx = RunContext(job_id=job_id, agent_id="root", budget=Budget())
    own = brought.brought(agent).tools
    calls = [ToolCall(f"c{n}", "plot", given) for n, given in enumerate(arguments, 1)]
    return [run_tool(call, ctx, workspace, None, own).splitlines() for call in calls], workspace


def test_a_structured_output_reads_a_line_a_part_its_image_kept_below_the_agent(redis_client):
    [said], workspace = plotted(redis_client, "tests.agents.sdk_agents:plotting", '{"label": "sales"}')
    assert said == ["plot of sales", "[image: images/c1-1.png]", "[image file-plot1]", "[file series.csv]"]
    assert workspace.read_bytes("images/c1-1.png") == png(9, 3)


def test_outside_a_covey_run_a_wrapped_tool_runs_as_the_sdk_calls_it():
    from covey_example_agents.triage import lookup_order

    brought.brought(TRIAGE)  # wrapped for replay in this process
    context = SdkToolContext(context=None, tool_name="lookup_order", tool_call_id="c", tool_arguments="{}")
    assert asyncio.run(lookup_order.on_invoke_tool(context, '{"order_id": "B2"}')) == "waiting for stock"


def test_two_different_tools_of_one_name_are_refused_naming_it():
    with pytest.raises(AgentNotFound, match="two different function tools are named 'tally'"):
        brought.brought("tests.agents.sdk_agents:clashing")
