"""``probe``: a strategy another package would register, for the integration tests.

It spawns the one child its options describe (any ``ChildRequest`` fields) and
finishes with that child's status, error and ``data``, so a test sees what a
typed child request really ran as, through a real worker.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from covey.orchestration.actions import ChildRequest, ChildResults, Finish, Spawn
from covey.orchestration.states import StrategyState
from covey.status import AgentStatus

NAME = "probe"


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    child: dict[str, Any]


class State(StrategyState):
    """probe waits once, for its one child, and keeps nothing else."""

    phase: Literal["child"] = "child"


def start(spec, ctx) -> Spawn:
    return Spawn(state=State(), children=[ChildRequest(**Options.model_validate(spec.options).child)])


def resume(spec, ctx, state: State, outcome: ChildResults) -> Finish:
    child = outcome.results[0]
    data = {"status": child.status.value, "output": child.output, "error": child.error, "data": child.data}
    return Finish(state=state, status=AgentStatus.COMPLETED, output=child.output, data=data)
