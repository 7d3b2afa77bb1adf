"""The Agents SDK's model, answered through the run's session (``covey.agents.session``)."""

from __future__ import annotations

from typing import Any

from agents import Model, ModelProvider, ModelResponse, ModelSettings, ModelTracing
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import TResponseInputItem, TResponseStreamEvent
from agents.tool import Tool

from covey.agents import convert
from covey.agents.session import Session


class CoveyModel(Model):
    """Every model call of the run, whichever agent makes it, through the session."""

    def __init__(self, session: Session) -> None:
        self._session = session

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> ModelResponse:
        session = self._session
        asked = convert.request(
            system_instructions, input, tools, output_schema, handoffs, session.covey_runs, session.covey_spawns
        )
        return convert.response(await session.reply_to(asked))

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        return self._streamed(*args, **kwargs)

    async def _streamed(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - refused, never streamed
        raise NotImplementedError("covey runs an agent with Runner.run: streaming is covey's (spec.stream)")
        yield TResponseStreamEvent  # an async generator, as the interface has it


class CoveyProvider(ModelProvider):
    """The job's model answers for every model name an agent gives: which model runs is the spec's."""

    def __init__(self, session: Session) -> None:
        self._model = CoveyModel(session)

    def get_model(self, model_name: str | None) -> Model:
        return self._model
