"""``crash``: a strategy with a bug, for the integration tests.

It makes one model call and raises on the reply, as a strategy's bug would after
its call was answered: the step crashes between the call and the agent's end.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from covey.orchestration.actions import CallModel
from covey.orchestration.prompts import opening
from covey.orchestration.states import StrategyState

NAME = "crash"


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")


class State(StrategyState):
    """crash waits for its one reply."""

    phase: Literal["reply"] = "reply"


def start(spec, ctx) -> CallModel:
    return CallModel(state=State(), messages=opening(spec, ctx), tools=[])


def resume(spec, ctx, state: State, outcome) -> CallModel:
    raise RuntimeError("the strategy broke on its reply")
