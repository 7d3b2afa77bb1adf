"""A pydantic-ai agent as a covey job, through a real worker, Redis and the sim: its typed
output comes back to the caller as its type, its tool run and counted as covey's."""

from __future__ import annotations

import sys

import pytest

from tests.images import png
from tests.integration.conftest import ROOT, own_worker

ORDERS = "covey_example_agents.orders:orders"
ANSWERED = '[sim:call lookup_order {"order_id": "A1"}] [sim:then final_result {"order_id": "A1", "status": "shipped"}]'


@pytest.fixture(scope="module")
def client():
    with own_worker(PYTHONPATH=f"{ROOT}:{ROOT}/examples/agents") as (_, c):
        yield c


def test_a_pydantic_ai_agents_typed_output_arrives_as_its_type_and_its_tool_is_covey_s(client):
    sys.path.insert(0, f"{ROOT}/examples/agents")
    try:
        from covey_example_agents.orders import OrderStatus
    finally:
        sys.path.remove(f"{ROOT}/examples/agents")
    handle = client.submit(client.spec(ANSWERED, agent=ORDERS))
    result = handle.result(timeout=90)
    assert result.ok, result.error
    assert result.output_as(OrderStatus) == OrderStatus(order_id="A1", status="shipped")
    ledger = handle.ledger()
    assert (ledger.cycles_used, ledger.tool_calls_used, ledger.tokens_reserved) == (2, 1, 0)
    tools = [e for e in handle.transcript().events if e.kind == "tool"]
    assert len(tools) == 1


def test_a_tools_images_reach_the_agents_next_model_call_and_stay_in_the_workspace(client):
    handle = client.submit(
        client.spec('Plot. [sim:call plot {"label": "sales"}]', agent="tests.agents.pai_agents:plotting")
    )
    result = handle.result(timeout=90)
    drawn = png(9, 3)
    assert result.ok, result.error
    saw = f"(saw [image image/png 9x3, {len(drawn)} bytes], [image https://example.com/plot.png])"
    assert result.output.endswith(saw), result.output
    [kept] = [path for path in handle.files() if path.startswith("images/")]
    assert kept in result.output and handle.get_file(kept) == drawn
