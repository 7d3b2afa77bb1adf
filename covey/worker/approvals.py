"""Tool calls that wait for a person's decision before they run (``covey.store.approvals``).

A call needs approval when its tool says so (``@tool(needs_approval=...)``: always,
or when a predicate of the call's arguments says so) or its name matches one of
the spec's ``approve`` patterns. Before the calls of a reply run, those that need
approval and have no decision are asked for, and the agent waits for one: out of
every worker slot, its model call settled, the reply's calls run by its next step
once a decision comes. An approved call then runs as any other (once: its result
is recorded); a denied or expired one does not run, and the model reads why.
"""

from __future__ import annotations

import fnmatch
import json
import logging
from dataclasses import dataclass
from datetime import timedelta

from covey.events import preview
from covey.models.replies import ToolCall
from covey.status import APPROVAL, Wait
from covey.store.approvals import Approval
from covey.tools import registry
from covey.worker.agent_state import AgentState
from covey.worker.deps import Deps
from covey.worker.redaction import redact
from covey.worker.tools import brought

log = logging.getLogger(__name__)

DENIED = "error: a person denied this call"
EXPIRED = "error: no one approved this call in time"


@dataclass(frozen=True)
class Park:
    """The agent waits for a decision on any of ``calls`` (their ids); ``wait`` says so."""

    wait: Wait
    calls: list[str]


def required(state: AgentState, call: ToolCall) -> bool:
    """Whether ``call`` waits for a person before it runs."""
    if any(fnmatch.fnmatchcase(call.name, pattern) for pattern in state.spec.approve):
        return True
    own = brought(state.spec).get(call.name)
    if own is None and call.name not in registry.names():
        return False
    needs = (own or registry.get(call.name)).needs_approval
    if not callable(needs):
        return needs
    try:
        arguments = json.loads(call.arguments or "{}")
        return bool(needs(arguments if isinstance(arguments, dict) else {}))
    except Exception:  # a predicate that fails cannot say a call is safe: a person decides
        log.exception("the approval predicate of tool %s failed: its call waits for a person", call.name)
        return True


def gate(deps: Deps, state: AgentState, calls: list[tuple[ToolCall, str]]) -> Park | dict[str, str]:
    """For the reply's ``calls`` (each with its id): the park of the agent while some
    that need approval have no decision (asked for now, once each); else the text
    the model reads for each denied or expired one, by the model's call id."""
    needed = [(call, rid) for call, rid in calls if required(state, call)]
    if not needed:
        return {}
    ctx = state.ctx
    decided = deps.approvals.read(ctx.job_id, [rid for _, rid in needed])
    waiting = [(call, rid) for call, rid in needed if decided.get(rid) is None or decided[rid].decision is None]
    if waiting:
        now = deps.now()
        until = min(
            d for d in (now + timedelta(seconds=state.spec.approval_timeout), state.deadline, ctx.budget.deadline) if d
        )
        for call, rid in waiting:
            if rid not in decided:
                asked = Approval(
                    job_id=ctx.job_id,
                    call_id=rid,
                    agent_id=ctx.agent_id,
                    tool=call.name,
                    arguments=preview(redact(call.arguments)) or "",
                    requested_at=now,
                    until=until,
                )
                deps.approvals.request(ctx.job_id, asked)
        names = ", ".join(sorted({call.name for call, _ in waiting}))
        latest = max((decided[rid].until if rid in decided else until) for _, rid in waiting)
        return Park(Wait(reason=f"{APPROVAL} of {names}", until=latest), [rid for _, rid in waiting])
    return {call.id: _refused(decided[rid]) for call, rid in needed if not decided[rid].approved}


def _refused(approval: Approval) -> str:
    if approval.decision == "expired":
        return f"{EXPIRED} (it waited until {approval.until:%Y-%m-%d %H:%M:%S} UTC)"
    return f"{DENIED}: {approval.reason}" if approval.reason else DENIED
