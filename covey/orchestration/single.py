"""single: one model call with no tools; the reply is the answer.

The strategy for scorers, proposers and judges that another strategy spawns.
With the ``schema`` option the model is asked for JSON matching that JSON Schema,
and the parsed value becomes the result's ``data`` for the parent to read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from covey.context import RunContext
from covey.models.replies import ModelReply
from covey.orchestration import states
from covey.orchestration.actions import Action, CallModel, Finish, Outcome
from covey.orchestration.answer_schema import SchemaOptions
from covey.orchestration.prompts import opening
from covey.orchestration.states import Run, StrategyState
from covey.status import AgentStatus

if TYPE_CHECKING:
    from covey.spec import AgentSpec

NAME = "single"


class Options(SchemaOptions):
    """single takes the answer's ``schema`` (and its name) alone."""


class State(StrategyState):
    """single waits for its one reply and keeps nothing else."""

    phase: Literal["reply"] = "reply"


def start(spec: AgentSpec, ctx: RunContext) -> Action:
    options = Run.of(Options, spec, ctx).options
    return CallModel(
        state=State(),
        messages=opening(spec, ctx),
        tools=[],
        schema=options.output_schema,
        schema_name=options.schema_name,
    )


def resume(spec: AgentSpec, ctx: RunContext, state: State, outcome: Outcome) -> Action:
    return states.resume(NAME, Options, spec, ctx, state, outcome, {("reply", ModelReply): _on_reply})


def _on_reply(run: Run[Options], state: State, reply: ModelReply) -> Finish:
    return Finish(state=state, status=AgentStatus.COMPLETED, output=reply.content or "", data=reply.parsed)
