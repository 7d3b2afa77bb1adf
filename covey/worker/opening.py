"""What a step reads before it runs, in one round trip.

Every step first asks whether its agent already finished (its tree node) and
whether this delivery is the message its agent expects (the outbox); an agent's
first step also reads the terms its ledger row holds. Asked one after another,
these were three round trips of every agent, each a wait for the GIL again on a
busy worker; read in one pipeline, in the same order, they are one.
"""

from __future__ import annotations

from dataclasses import dataclass

from covey import keys
from covey.budgets.ledger import AgentRow
from covey.budgets.redis_ledger import agent_row
from covey.store.tree import Node, unpack
from covey.worker.deps import Deps


@dataclass(frozen=True)
class Opening:
    node: Node | None  # the agent's tree node, if it has one
    expected: str | None  # the message its next step is, as stored (``Message.loads`` reads it)
    row: AgentRow | None  # its ledger row, when asked for and opened


def read(deps: Deps, job_id: str, agent_id: str, row: bool = False) -> Opening:
    """The agent's node and expected message, and its ledger row if ``row``."""
    with deps.redis.pipeline(transaction=False) as pipe:
        pipe.hget(keys.nodes(job_id), agent_id)
        pipe.hget(keys.expected(job_id), agent_id)
        if row:
            pipe.hgetall(keys.agent(job_id, agent_id))
        node, expected, *raw = pipe.execute()
    return Opening(
        node=None if node is None else unpack(agent_id, node),
        expected=None if expected is None else str(expected),
        row=agent_row(agent_id, raw[0]) if raw and raw[0] else None,
    )
