"""What an agent that asked for it (``budget_notice``) is told of its budget before each model call.

A system note appended to the messages the call sends, so it is part of the
prompt the call reserves for, and stays in the conversation as the one after it
is added: the model reads how its room shrinks. What is left is the tightest of
the agent's own row, its ancestors' and its scopes' (calls in flight held), its
own calls left under its cycle cap, and the seconds to its nearest deadline.
"""

from __future__ import annotations

from typing import Any

from covey.worker.agent_state import AgentState
from covey.worker.deps import Deps

PREFIX = "Budget left: "


def told(messages: list[dict[str, Any]], note: dict[str, Any]) -> None:
    """End ``messages`` with ``note``: in place of the note already last, when the same
    call is asked for again (after a wait for room, or unanswered), so the model reads
    one note, as of now, where each ask had appended its own."""
    if messages and messages[-1].get("role") == "system" and str(messages[-1].get("content")).startswith(PREFIX):
        messages[-1] = note
    else:
        messages.append(note)


def note(deps: Deps, state: AgentState, seconds_left: float | None) -> dict[str, Any]:
    """The system message: ``Budget left: 12,345 tokens, $0.0123, 5 model calls, 40 s.``"""
    ctx = state.ctx
    left = deps.ledger.left(ctx.job_id, ctx.chain, ctx.scopes)
    own = max(0, state.spec.max_cycles - state.cycle)
    calls = own if left.cycles is None else min(own, left.cycles)
    parts = [f"{left.tokens:,} tokens"] if left.tokens is not None else []
    if left.cost is not None:
        parts.append(f"${left.cost:.4f}")
    parts.append(f"{calls} model call{'' if calls == 1 else 's'}")
    if seconds_left is not None:
        parts.append(f"{seconds_left:.0f} s")
    return {
        "role": "system",
        "content": f"{PREFIX}{', '.join(parts)}. Plan to give your answer within it.",
    }
