"""One run of an Agents SDK agent, replayed from its journal up to new ground.

Each step of the ``agent`` strategy runs the SDK's ``Runner`` from the start with
``CoveyModel``: the n-th model call it makes is answered from the journal's n-th
reply, once the request is seen to be the one recorded; a request that differs
ends the run (the run took another path: ``nondeterministic``, naming the call).
The first call past the journal is new ground: the run stops there and hands the
request out, for the worker to reserve, call and settle as covey's ``CallModel``.
Tool calls are answered from the journal's results by call id.

Stopping is waiting: the call that reaches new ground parks on an event no one
sets, and the driver (``covey.agents.driver``) cancels the run once something
parks. An exception would do, but the SDK turns some into text the model reads.
"""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import dataclass, field
from typing import Any

from agents import Model, ModelProvider, ModelResponse, ModelSettings, ModelTracing
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import TResponseInputItem, TResponseStreamEvent
from agents.tool import Tool

from covey.agents import convert
from covey.agents.convert import Request

# The session of the covey run this task belongs to; None outside one (a tool
# covey wrapped then calls through). The SDK's tasks inherit it.
current: contextvars.ContextVar[Session | None] = contextvars.ContextVar("covey_agent_session", default=None)


@dataclass(frozen=True)
class Recorded:
    """A settled model call as the journal holds it: the request's key and the reply."""

    key: str
    reply: dict[str, Any]


@dataclass(frozen=True)
class Diverged:
    """The run asked for something its journal does not hold in that place."""

    call: str  # which: "model call 3", "tool call lookup (call_ab12)"
    reason: str


@dataclass
class Session:
    """What one replay reads (the journal) and how it ended: parked at new ground
    (``request``) or off the recorded path (``diverged``). ``covey_runs``: ids of
    the tool objects whose calls covey runs; ``covey_spawns``: of the ``as_tool``
    agents whose calls covey runs as children."""

    replies: list[Recorded]
    results: dict[str, str]
    covey_runs: frozenset[int]
    covey_spawns: frozenset[int] = frozenset()
    asked: int = 0
    request: Request | None = None
    diverged: Diverged | None = None
    parked: asyncio.Event = field(default_factory=asyncio.Event)

    async def reply_to(self, request: Request) -> ModelResponse:
        index, self.asked = self.asked, self.asked + 1
        if index >= len(self.replies):
            if self.request is None:
                self.request = request
            return await self._park()
        recorded = self.replies[index]
        if recorded.key != request.key:
            self.diverged = self.diverged or Diverged(
                f"model call {index + 1}",
                f"model call {index + 1} asked for another request than the one recorded: "
                "the agent took another path on replay (its code, or what it read, changed)",
            )
            return await self._park()
        return convert.response(recorded.reply)

    async def tool_result(self, name: str, call_id: str) -> str:
        if call_id in self.results:
            return self.results[call_id]
        self.diverged = self.diverged or Diverged(
            f"tool call {name} ({call_id})", f"tool call {name} ({call_id}) has no recorded result to replay"
        )
        return await self._park()

    async def _park(self) -> Any:
        self.parked.set()
        await asyncio.Event().wait()  # never set: the driver cancels the run
        raise AssertionError("unreachable")


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
        return await session.reply_to(asked)

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
