"""single: one model call with no tools; the reply is the answer.

The strategy for scorers, proposers and judges that another strategy spawns.
With the ``schema`` option the model is asked for JSON matching that JSON Schema,
and the parsed value becomes the result's ``data`` for the parent to read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from covey.context import RunContext
from covey.models.replies import ModelReply
from covey.models.structured import SCHEMA_NAME, check_schema
from covey.orchestration import states
from covey.orchestration.actions import Action, CallModel, Finish, Outcome
from covey.orchestration.prompts import opening
from covey.orchestration.states import Run, StrategyState
from covey.status import AgentStatus

if TYPE_CHECKING:
    from covey.spec import AgentSpec

NAME = "single"


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    output_schema: dict[str, Any] | None = Field(
        default=None, alias="schema", description="JSON Schema the answer must match"
    )
    schema_name: str = Field(
        default=SCHEMA_NAME,
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="the schema's name sent to the model (it picks a sim script)",
    )

    @field_validator("output_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            check_schema(value)
        return value


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
