"""An order desk written with pydantic-ai, nothing of covey's in it: a function tool and a typed output.

Run it on covey (its model is the job's)::

    covey run --agent covey_example_agents.orders:orders "Where is order A1?"
"""

from __future__ import annotations

from pydantic import BaseModel
from pydantic_ai import Agent

ORDERS = {"A1": "shipped on Monday", "B2": "waiting for stock"}


class OrderStatus(BaseModel):
    order_id: str
    status: str


orders = Agent(
    instructions="You answer where an order is. Look it up with lookup_order, then give its status.",
    output_type=OrderStatus,
)


@orders.tool_plain
def lookup_order(order_id: str) -> str:
    """The status of an order, by its id."""
    return ORDERS.get(order_id, f"no order {order_id}")
