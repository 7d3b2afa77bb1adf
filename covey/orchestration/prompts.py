"""The opening messages every strategy starts a conversation with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from covey import wire
from covey.context import RunContext

if TYPE_CHECKING:
    from covey.spec import AgentSpec


def opening(spec: AgentSpec, ctx: RunContext) -> list[dict[str, Any]]:
    """The system message (role, depth, instructions), the conversation so far (a
    session's), and the task. The system message says how many messages come before
    the task, so a model (and the sim) tells the conversation from the new task."""
    system = f"You are {spec.role}, an agent of covey at depth {ctx.depth}. {spec.instructions}".strip()
    if spec.history:
        system += f" {wire.HISTORY.format(len(spec.history))}"
    before = [said.model_dump() for said in spec.history]
    return [{"role": "system", "content": system}, *before, {"role": "user", "content": spec.task}]
