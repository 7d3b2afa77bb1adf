"""A support desk written with the OpenAI Agents SDK, nothing of covey's in it.

``triage`` looks an order up with a function tool, hands refunds off to
``billing`` (which has a tool of its own), and asks two agents it uses as tools:
``policy`` (the shop's rules) and ``translator``; on covey each of their calls is
a sub-agent of its own. ``summary`` answers with a typed ``OrderSummary``. Run
them on covey::

    covey run --agent covey_example_agents.triage:triage "Where is order A1?"
"""

from __future__ import annotations

from agents import Agent, function_tool
from pydantic import BaseModel

ORDERS = {"A1": "shipped on Monday", "B2": "waiting for stock"}


@function_tool
def lookup_order(order_id: str) -> str:
    """The status of an order, by its id."""
    return ORDERS.get(order_id, f"no order {order_id}")


@function_tool
def refund(order_id: str) -> str:
    """Refund an order, by its id."""
    return f"refund of order {order_id} started" if order_id in ORDERS else f"no order {order_id}"


billing = Agent(
    name="billing",
    handoff_description="Handles refunds and payments.",
    instructions="You handle refunds. Refund the order the customer names with the refund tool.",
    tools=[refund],
)

policy = Agent(
    name="policy",
    instructions="You know the shop's rules: refunds within 30 days, shipping in 3 days. Answer the question.",
)

translator = Agent(name="translator", instructions="Translate the text you are given into French.")

triage = Agent(
    name="triage",
    instructions="You are a support desk. Look orders up with lookup_order; hand refunds to billing; "
    "ask_policy answers questions on the shop's rules, translate puts an answer into French.",
    tools=[
        lookup_order,
        policy.as_tool("ask_policy", "Ask the policy expert a question about the shop's rules."),
        translator.as_tool("translate", "Translate a text into French."),
    ],
    handoffs=[billing],
)


class OrderSummary(BaseModel):
    order_id: str
    status: str


summary = Agent(
    name="summary",
    instructions="Summarise the order the customer asks about.",
    tools=[lookup_order],
    output_type=OrderSummary,
)
