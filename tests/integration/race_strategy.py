"""``race``: a strategy another package would register, for the integration tests.

It spawns the children its options describe (``ChildRequest`` fields) joining each
as it finishes; on the first completed one it cancels those still running (or,
with ``finish_first``, finishes there and then), then finishes once every child is
back, with each child's key, status, error and cycles in the order they finished,
so a test sees what a cancel did through a real worker.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from covey.orchestration.actions import Action, Cancel, ChildRequest, ChildResults, Finish, Spawn
from covey.orchestration.states import StrategyState
from covey.status import AgentStatus

NAME = "race"


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    children: list[dict[str, Any]]
    finish_first: bool = False


class State(StrategyState):
    """race waits for its children, and keeps what each came back with."""

    phase: Literal["children"] = "children"
    back: list[dict[str, Any]] = Field(default_factory=list)
    cancelled: bool = False


def start(spec, ctx) -> Spawn:
    children = [ChildRequest(**c) for c in Options.model_validate(spec.options).children]
    return Spawn(state=State(), children=children, join="each")


def resume(spec, ctx, state: State, outcome: ChildResults) -> Action:
    for key, r in zip(outcome.keys, outcome.results):
        state.back.append({"key": key, "status": r.status.value, "error": r.error, "cycles": r.usage.cycles})
    if not outcome.running or Options.model_validate(spec.options).finish_first:
        return Finish(state=state, status=AgentStatus.COMPLETED, output="done", data=state.back)
    if not state.cancelled and any(r.status is AgentStatus.COMPLETED for r in outcome.results):
        state.cancelled = True
        return Cancel(state=state, agent_ids=list(outcome.running))
    return Spawn(state=state, children=[], join="each")
