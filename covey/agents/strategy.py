"""``agent``: an OpenAI Agents SDK or pydantic-ai agent run as a covey agent, replayed step by step.

Its state is the run's journal: the reply of every model call settled so far
(with the key of the request it answered) and the result of every tool call.
Each step re-runs the agent from the start over that journal (the SDK's
``Runner``, pydantic-ai's ``Agent.run``; ``covey.agents.session``) until it
reaches new ground:

- a model call past the journal becomes ``CallModel`` with the framework's own
  messages, function schemas (tools and handoffs) and output schema, and the
  request's key, which the worker keeps with the call's record and checks on a
  replay after a crash;
- a reply calling function tools becomes ``RunTools`` for those calls at once,
  so they run in covey's tool policy and are recorded; its calls of ``as_tool``
  agents become covey children (``Spawn``, one child a call, all at once), each
  running that agent under this strategy on any worker, its budget a share of
  this one's, while this agent waits off its slot; a child's answer is its
  call's result. Handoffs run inside the SDK, their model calls covey's;
- the images a reply's tools returned (``ToolResults.shown``) follow its results
  in every later request, as covey's own agents see them; the request's key is
  of the framework's messages alone;
- the run's end becomes ``Finish``: its final output as text, and as JSON in
  ``data`` when the agent has an output type.

The framework runs in the strategy: pure of Redis and Celery, and its replay is
deterministic for a deterministic agent. A run that asks for another request
than the one recorded fails with cause ``nondeterministic``, naming the call.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from covey.agents import brought as of
from covey.agents import loading
from covey.agents.session import Done, Raised, Recorded, Session
from covey.context import RunContext
from covey.models.replies import ModelReply, ToolCall
from covey.orchestration import states
from covey.orchestration.actions import (
    Action,
    CallModel,
    ChildRequest,
    ChildResults,
    Finish,
    Outcome,
    RunTools,
    Spawn,
    ToolResults,
)
from covey.orchestration.states import Run, StrategyState
from covey.status import AgentStatus, Cause, CauseKind
from covey.tools import registry
from covey.tools.builtin import CONTROL_TOOLS

if TYPE_CHECKING:
    from covey.spec import AgentSpec

NAME = "agent"
DEFAULT_MAX_TURNS = 10  # the SDK's own default


class Options(BaseModel):
    """``max_turns``: the framework's cap on the run's model calls (the SDK's ``max_turns``,
    pydantic-ai's ``request_limit``);
    ``tool``: run the agent behind this ``as_tool`` tool of the spec's agent (a child's)."""

    model_config = ConfigDict(extra="forbid")

    max_turns: int = Field(default=DEFAULT_MAX_TURNS, ge=1, le=1000)
    tool: str | None = Field(default=None, min_length=1, max_length=64)


class Step(BaseModel):
    """A settled model call: the key of the request and the reply, as the framework reads it."""

    key: str
    reply: dict[str, Any]


class State(StrategyState):
    """The journal, and what the call in flight asked: its key, and the tools whose
    calls in its reply covey runs."""

    phase: Literal["reply", "tools", "children"] = "reply"
    replies: list[Step] = Field(default_factory=list)
    results: dict[str, str] = Field(default_factory=dict)
    asked: str = ""
    run_by_covey: list[str] = Field(default_factory=list)
    as_children: list[str] = Field(default_factory=list)
    spawning: list[ToolCall] = Field(default_factory=list)  # the reply's as_tool calls, once its tools ran
    shown: dict[str, dict[str, Any]] = Field(default_factory=dict)  # a reply's first call id -> its tools' images


def start(spec: AgentSpec, ctx: RunContext) -> Action:
    return _replayed(Run.of(Options, spec, ctx), State())


def resume(spec: AgentSpec, ctx: RunContext, state: State, outcome: Outcome) -> Action:
    return states.resume(
        NAME,
        Options,
        spec,
        ctx,
        state,
        outcome,
        {
            ("reply", ModelReply): _on_reply,
            ("tools", ToolResults): _on_tools,
            ("children", ChildResults): _on_children,
        },
    )


def _on_reply(run: Run[Options], state: State, reply: ModelReply) -> Action:
    recorded = {"content": reply.content, "tool_calls": [asdict(c) for c in reply.tool_calls]}
    state.replies.append(Step(key=state.asked, reply=recorded))
    fresh = [c for c in reply.tool_calls if c.id not in state.results]
    calls = [c for c in fresh if c.name in state.run_by_covey]
    state.spawning = [c for c in fresh if c.name in state.as_children]
    if calls:
        state.phase = "tools"
        return RunTools(state=state, calls=calls)
    return _spawned(run, state)


def _on_tools(run: Run[Options], state: State, outcome: ToolResults) -> Action:
    state.results.update(outcome.results)
    if outcome.shown is not None:
        state.shown[next(iter(outcome.results))] = outcome.shown
    return _spawned(run, state)


def _spawned(run: Run[Options], state: State) -> Action:
    """The reply's ``as_tool`` calls as children, all at once; else on with the run."""
    if not state.spawning:
        return _replayed(run, state)
    state.phase = "children"
    path = run.spec.agent
    options = {"tool": None, "max_turns": run.options.max_turns}
    children = [
        ChildRequest(task=_input(c), role=c.name, agent=path, options={**options, "tool": c.name}, key=c.id)
        for c in state.spawning
    ]
    return Spawn(state=state, children=children)


def _on_children(run: Run[Options], state: State, outcome: ChildResults) -> Action:
    """Each child's answer is its call's result, as the SDK's ``as_tool`` gives its
    agent's final output; a child that did not complete says why, as a tool's error."""
    for key, result in zip(outcome.keys, outcome.results):
        if key is not None:
            said = f"error: agent {result.role} ended {result.status.value}: {result.error}"
            state.results[key] = result.output or "" if result.ok else said
    state.spawning = []
    return _replayed(run, state)


def _input(call: ToolCall) -> str:
    """The child's task: the ``input`` an ``as_tool`` call gives (its default schema),
    else the call's arguments as they came."""
    try:
        args = json.loads(call.arguments or "{}")
    except ValueError:
        return call.arguments
    given = args.get("input") if isinstance(args, dict) else None
    return given if isinstance(given, str) and given.strip() else call.arguments


def _replayed(run: Run[Options], state: State) -> Action:
    """Run the agent over the journal: the action at the new ground it reaches, or its end."""
    path = run.spec.agent
    assert path is not None  # the spec gives the agent strategy an agent
    try:
        brought, tool = of.brought(path), run.options.tool
        agent = loading.load(path) if tool is None else of.agent_behind(path, tool)
    except loading.AgentNotFound as e:
        return Finish(state=state, status=AgentStatus.FAILED, error=str(e), cause=Cause(kind=CauseKind.INVALID_SPEC))
    journal = [Recorded(s.key, s.reply) for s in state.replies]
    session = Session(journal, dict(state.results), brought.ids, brought.agent_ids)
    kind = loading.kind(agent)
    # The framework is imported where such an agent runs: its extra is optional.
    if kind == loading.PYDANTIC_AI:
        from covey.agents import pydantic_driver as driver
    else:
        from covey.agents import sdk_driver as driver  # type: ignore[no-redef]
    ended = driver.run(agent, run.spec.task, session, run.options.max_turns, _covey_tools(run))
    if session.diverged is not None:
        cause = Cause(kind=CauseKind.NONDETERMINISTIC, call=session.diverged.call)
        return Finish(state=state, status=AgentStatus.FAILED, error=session.diverged.reason, cause=cause)
    if isinstance(ended, Done):
        return _finished(state, ended.output)
    if isinstance(ended, Raised):
        return _raised(state, ended.error, kind)
    request = session.request
    assert request is not None  # parked, and not off its path: at new ground
    state.phase, state.asked = "reply", request.key
    state.run_by_covey, state.as_children = request.run_by_covey, request.as_children
    return CallModel(
        state=state,
        messages=_showing(request.messages, state.shown),
        tools=[],
        schema=request.schema,
        schema_name=request.schema_name,
        functions=request.functions,
        key=request.key,
    )


def _showing(messages: list[dict[str, Any]], shown: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The framework's messages with the images a reply's tools returned after all its
    results, as covey's own agents see them (a tool message holds text alone). The
    request's key is of the framework's messages alone: a replay asks for the same."""
    out: list[dict[str, Any]] = []
    results: list[str] = []  # the call ids of the run of tool messages just read
    for message in [*messages, {"role": "end"}]:
        if message.get("role") == "tool":
            results.append(message.get("tool_call_id", ""))
        else:
            out += [shown[call_id] for call_id in results if call_id in shown]
            results = []
        out.append(message)
    return out[:-1]


def _covey_tools(run: Run[Options]) -> list[dict[str, Any]]:
    """covey's tools the job names (``tools``: names or patterns of the built-ins, a
    worker's functions and MCP servers' tools), as function schemas for the agent; none
    when it names none, since an agent declares its own tools."""
    if run.spec.tools is None:
        return []
    names = [n for n in registry.offered(run.ctx.allow, run.ctx.deny) if n not in CONTROL_TOOLS]
    return registry.schemas(names, None)


def _finished(state: State, output: Any) -> Finish:
    """Its final output: text as is; anything else as JSON, in ``data`` too."""
    if isinstance(output, str):
        return Finish(state=state, status=AgentStatus.COMPLETED, output=output)
    data = TypeAdapter(Any).dump_python(output, mode="json")
    return Finish(state=state, status=AgentStatus.COMPLETED, output=json.dumps(data), data=data)


def _raised(state: State, error: BaseException, kind: str | None) -> Finish:
    """The framework's end of a run as covey's cause: a tripped guardrail, a reply it
    could not use, or the run giving up (its turns spent, anything else it raised)."""
    said = f"{type(error).__name__}: {error}"
    cause = Cause(kind=CauseKind.GAVE_UP)
    if kind == loading.PYDANTIC_AI:
        from pydantic_ai.exceptions import UnexpectedModelBehavior

        if isinstance(error, UnexpectedModelBehavior):
            cause = Cause(kind=CauseKind.MALFORMED_REPLY)
        return Finish(state=state, status=AgentStatus.FAILED, error=said, cause=cause)
    from agents.exceptions import (
        InputGuardrailTripwireTriggered,
        ModelBehaviorError,
        OutputGuardrailTripwireTriggered,
    )

    if isinstance(error, InputGuardrailTripwireTriggered | OutputGuardrailTripwireTriggered):
        result = getattr(error, "guardrail_result", None)
        guard = getattr(getattr(result, "guardrail", None), "get_name", lambda: None)()
        cause = Cause(kind=CauseKind.GUARDRAIL, guardrail=guard)
    elif isinstance(error, ModelBehaviorError):
        cause = Cause(kind=CauseKind.MALFORMED_REPLY)
    return Finish(state=state, status=AgentStatus.FAILED, error=said, cause=cause)
