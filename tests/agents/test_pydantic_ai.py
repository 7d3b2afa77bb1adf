"""A pydantic-ai agent under the ``agent`` strategy, over the real pydantic-ai: its model
requests are pydantic-ai's own Chat Completions requests, its tools covey's, its output typed."""

from __future__ import annotations

import json

import pytest
from pydantic_ai.models.test import TestModel

from covey import keys
from covey.agents import brought, strategy
from covey.budgets.budget import Budget
from covey.config.settings import Settings
from covey.context import RunContext
from covey.models.replies import ModelReply, ToolCall
from covey.orchestration.actions import CallModel, Finish, RunTools, ToolResults
from covey.parts import MAX_PARTS
from covey.results import AgentResult
from covey.spec import AgentSpec
from covey.store.workspace import Workspace
from covey.worker.deps import Deps
from covey.worker.tools import run_tool
from tests.agents.test_replay import opened
from tests.agents.test_sdk_tools import plotted
from tests.images import png
from tests.orchestration.checkpointing import resumed
from tests.worker.test_loop import dies_in_call, run_again

ORDERS = "covey_example_agents.orders:orders"
CTX = RunContext(job_id="j", agent_id="root", budget=Budget())


def test_a_run_asks_with_pydantic_ais_own_request_and_its_typed_output_comes_back_as_its_type():
    s = AgentSpec(task="Where is A1?", agent=ORDERS)
    asked = strategy.start(s, CTX)
    assert isinstance(asked, CallModel)
    assert asked.messages[0]["content"].startswith("You answer where an order is.")
    assert [f["function"]["name"] for f in asked.functions] == ["lookup_order", "final_result"]
    assert asked.state.run_by_covey == ["lookup_order"]  # the output tool is pydantic-ai's to read
    calling = ModelReply(None, [ToolCall("c1", "lookup_order", '{"order_id": "A1"}')], "tool_calls")
    ran = resumed(strategy, s, CTX, asked.state, calling)
    assert isinstance(ran, RunTools) and [c.id for c in ran.calls] == ["c1"]
    again = resumed(strategy, s, CTX, ran.state, ToolResults({"c1": "shipped on Monday"}))
    assert again.messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "shipped on Monday"}
    answer = {"order_id": "A1", "status": "shipped on Monday"}
    final = ModelReply(None, [ToolCall("c2", "final_result", json.dumps(answer))], "tool_calls")
    done = resumed(strategy, s, CTX, again.state, final)
    assert isinstance(done, Finish) and done.data == answer

    from covey_example_agents.orders import OrderStatus

    result = AgentResult(status="completed", job_id="j", agent_id="root", output=done.output, data=done.data)
    assert result.output_as(OrderStatus) == OrderStatus(**answer)


def test_a_tool_runs_through_covey_and_outside_covey_the_agent_runs_as_before(redis_client):
    own = brought.brought(ORDERS).tools
    workspace = Workspace(redis_client, "j", keys.DEFAULT_JOB_TTL_SECONDS)
    said = run_tool(ToolCall("c1", "lookup_order", '{"order_id": "B2"}'), CTX, workspace, None, own)
    assert said == "waiting for stock"
    from covey_example_agents.orders import orders

    assert orders.run_sync("Where is A1?", model=TestModel()).output.order_id  # its wrapped toolset passes through


def test_a_tools_images_are_kept_below_the_agent_and_named_each_on_its_line_other_files_named(redis_client):
    agent = "tests.agents.pai_agents:plotting"
    [said, many], workspace = plotted(redis_client, agent, '{"label": "sales"}', '{"label": "x", "copies": 9}')
    assert said == [
        "plot of sales",
        "[image: images/c1-1.png]",
        "[image: https://example.com/plot.png]",
        "[document-url https://example.com/data.pdf]",
    ]
    assert workspace.read_bytes("images/c1-1.png") == png(9, 3)
    assert len([line for line in many if line.startswith("[image: ")]) == MAX_PARTS
    assert many[MAX_PARTS + 1] == f"[image not shown: a result shows at most {MAX_PARTS}]"


def test_a_tool_return_reads_as_its_value_then_its_content_for_the_model_never_its_metadata(redis_client):
    [said], workspace = plotted(
        redis_client, "tests.agents.pai_agents:plotting", '{"label": "sales", "returned": true}'
    )
    assert said == ["plot of sales", "The plot:", "[image: images/c1-2.png]"]
    assert workspace.read_bytes("images/c1-2.png") == png(9, 3)


@pytest.fixture
def deps(redis_server):
    return Deps.from_settings(Settings(redis_url=redis_server.url, model_retries=0))


def test_through_covey_s_loop_every_call_is_charged_once_and_a_rerun_step_replays_the_tool(deps, tmp_path):
    counter = tmp_path / "runs.txt"
    spec = AgentSpec(task=f'Count. [sim:call tally {{"path": "{counter}"}}]', agent="tests.agents.pai_agents:counted")
    ctx = opened(deps, spec)
    dies_in_call(deps, ctx, spec, 2)
    out, rerun = run_again(deps, ctx, spec)
    assert out.result.ok and out.result.output == "tallied 1", out.result.error
    assert rerun.calls == 1 and counter.read_text().splitlines() == ["run"]
    snap = deps.ledger.snapshot(ctx.job_id)
    assert snap.cycles_used == out.result.usage.cycles == 2 and snap.tool_calls_used == 1
    assert snap.tokens_used == out.result.usage.total_tokens and snap.tokens_reserved == 0
