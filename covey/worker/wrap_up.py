"""An agent whose budget runs out ends with an answer: its wrap-up call.

When a model call of an agent is refused for tokens or money, or its reply is cut at
what the budget had left, the agent makes one last call instead of ending
``budget_exceeded`` with nothing: its messages, with no tools and no JSON schema,
and a note that this is its last reply. The agent ends ``completed`` with that
answer, its ``cause`` the budget that ran out and ``data.wrapped_up`` true, so a
parent gets an answer and a caller can tell it from a full run.

So that the wrap-up finds room, each call that offers tools (an agent that may act
again) keeps some out of its own and its descendants' reach (the ledger's ``keep``):
what the prompt it sent could cost again with the note, and two short replies'
worth, for what comes back from the call and for the answer. A call that offers none
keeps nothing: its reply may be the answer already. The agent's last call of the
usual kind is refused (or cut) that much earlier, and the wrap-up may spend what was
kept and whatever else is left. What is kept is in tokens: under a cost cap the
wrap-up has what money is left. A spec's ``wrap_up = false`` turns all of it off:
the agent ends ``budget_exceeded``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from covey.models.replies import ModelReply
from covey.models.tokens import byte_tokens, estimate_prompt_tokens
from covey.orchestration.actions import CallModel
from covey.spec import AgentSpec
from covey.status import Cause, CauseKind, Resource

# The reply a kept room leaves for the wrap-up (or the agent's own reply cap, when smaller).
REPLY_TOKENS = 256
NOTE = "Your budget is spent: no more tools. Give your final answer to the task now."
_NOTE_TOKENS = byte_tokens(json.dumps({"role": "user", "content": NOTE}))


@dataclass(frozen=True)
class WrappedUp:
    """The agent's last reply, an answer given when ``short`` (why its budget ran out)."""

    reply: ModelReply
    short: str
    cause: Cause

    @property
    def data(self) -> dict[str, Any]:
        return {"wrapped_up": True, "short": self.short}


def keep(spec: AgentSpec, action: CallModel, prompt: int) -> int:
    """Tokens a call of ``action`` (its prompt bounded by ``prompt``) keeps for the
    wrap-up: that prompt again without its tools and with the note, room for what
    the call adds to it (its reply, tools' or children's results) and for the
    wrap-up's reply, each a short reply's worth."""
    return bound(action, prompt) + _NOTE_TOKENS + 2 * min(REPLY_TOKENS, spec.max_call_tokens) if spec.wrap_up else 0


def bound(action: CallModel, prompt: int) -> int:
    """A bound on ``action``'s prompt sent without tools: its bound with them
    (``prompt``: tight where the previous call's reported count applies; tools only
    add), or its messages' bytes, whichever is smaller."""
    return min(prompt, estimate_prompt_tokens(action.messages, []))


def due(spec: AgentSpec, cause: Cause) -> bool:
    """Whether an agent stopped by ``cause`` wraps up: only a budget short of tokens or money."""
    return spec.wrap_up and cause.kind is CauseKind.BUDGET and cause.resource in (Resource.TOKENS, Resource.COST)


def last_call(action: CallModel) -> CallModel:
    """The call that asks for the final answer, told why, in free text. Its tools stay
    named for its bound (``bound``); the call sends none."""
    return replace(action, messages=[*action.messages, {"role": "user", "content": NOTE}], schema=None)
