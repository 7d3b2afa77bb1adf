"""What every strategy's state machine shares: a typed state with a phase, and one resume step.

A strategy's state is a pydantic model whose ``phase`` says what it waits for;
``resume`` looks up the handler of (phase, outcome), hands it a copy of the state
and the strategy's options validated once, and refuses any other pair with
``CannotResume``. The worker checkpoints the state as its model's JSON, so a
state is JSON-able by construction and another strategy's is refused, never read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from covey.context import RunContext
from covey.orchestration.actions import Action, Outcome

if TYPE_CHECKING:  # the spec validates strategy names against this package
    from covey.spec import AgentSpec


class StrategyState(BaseModel):
    """The base of a strategy's state. A subclass narrows ``phase`` to a ``Literal``
    of the points where it waits; unknown fields are refused, so a checkpoint of
    another strategy's state fails to load instead of being misread."""

    model_config = ConfigDict(extra="forbid")

    phase: str


OptionsT = TypeVar("OptionsT", bound=BaseModel)
StateT = TypeVar("StateT", bound=StrategyState)


@dataclass(frozen=True)
class Run(Generic[OptionsT]):
    """What a step reads besides its state: the agent's spec and context, and its
    strategy's options."""

    spec: AgentSpec
    ctx: RunContext
    options: OptionsT

    @classmethod
    def of(cls, options: type[OptionsT], spec: AgentSpec, ctx: RunContext) -> Run[OptionsT]:
        return cls(spec, ctx, options.model_validate(spec.options))


Handler = Callable[[Run[OptionsT], StateT, Any], Action]


class CannotResume(TypeError):
    """A strategy was handed an outcome its phase does not wait for: the caller's bug."""

    def __init__(self, strategy: str, phase: str, outcome: str) -> None:
        super().__init__(f"{strategy} cannot resume from {outcome} in phase {phase!r}")
        self.strategy, self.phase, self.outcome = strategy, phase, outcome


def resume(
    strategy: str,
    options: type[OptionsT],
    spec: AgentSpec,
    ctx: RunContext,
    state: StateT,
    outcome: Outcome,
    handlers: Mapping[tuple[str, type], Handler[OptionsT, StateT]],
) -> Action:
    """One step of ``strategy``: the handler of (``state.phase``, the outcome's type),
    given a copy of ``state`` to change (the caller's is never touched)."""
    handler = handlers.get((state.phase, type(outcome)))
    if handler is None:
        raise CannotResume(strategy, state.phase, type(outcome).__name__)
    return handler(Run.of(options, spec, ctx), state.model_copy(deep=True), outcome)
