"""The opening messages every strategy starts a conversation with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from covey.context import RunContext

if TYPE_CHECKING:
    from covey.spec import AgentSpec


def opening(spec: AgentSpec, ctx: RunContext) -> list[dict[str, Any]]:
    """The system message (role, depth, instructions) and the task."""
    system = f"You are {spec.role}, an agent of covey at depth {ctx.depth}. {spec.instructions}".strip()
    return [{"role": "system", "content": system}, {"role": "user", "content": spec.task}]
