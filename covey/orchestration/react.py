"""ReAct: think, call tools, read results, repeat until ``finish`` or a plain answer.

Control tools become Actions: ``spawn_agents`` and ``delegate`` become ``Spawn``
(the parent waits off-worker and reads its children's summaries as the tool's
result), ``finish`` becomes ``Finish``. Other tools become ``RunTools``.
A malformed tool call (arguments that are not JSON) fails the agent: it is a
broken model reply, not something a retry of the tool mends. A tool name the
model made up is answered as that call's error, naming the tools it may call,
and the model is asked again (each ask a cycle of its own), as a person would
correct it.

With the ``schema`` option every call asks for JSON matching it and ``finish`` is
not offered: the agent acts with its tools, and its answer (the reply without tool
calls) is that JSON, the result's ``data`` for the parent to read.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

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
from covey.orchestration.answer_schema import SchemaOptions
from covey.orchestration.prompts import opening
from covey.orchestration.states import Run, StrategyState
from covey.status import AgentStatus, Cause, CauseKind
from covey.tools.builtin import FINISH_TOOL, MAX_CHILD_SECONDS, SPAWN_TOOLS
from covey.tools.registry import check_names, offered

if TYPE_CHECKING:  # the spec validates strategy names against this package
    from covey.spec import AgentSpec

NAME = "react"


class Options(SchemaOptions):
    """react takes the answer's ``schema`` (and its name) alone; an unknown option is refused."""


class PendingSpawn(BaseModel):
    """The children one spawn call asked for; their summaries answer that call."""

    call_id: str
    single: bool  # ``delegate``: answered with one summary, not a list
    children: list[ChildRequest]


class State(StrategyState):
    """The conversation so far, the tools offered, and the spawns waiting for their children."""

    phase: Literal["reply", "tools", "children"] = "reply"
    messages: list[dict[str, Any]]
    tools: list[str]
    spawns: list[PendingSpawn] = Field(default_factory=list)
    shown: list[dict[str, Any]] = Field(default_factory=list)  # tools' images, to follow every result of the reply


def start(spec: AgentSpec, ctx: RunContext) -> Action:
    run = Run.of(Options, spec, ctx)
    tools = offered(ctx.allow, ctx.deny)
    if run.options.output_schema is not None:
        tools = [name for name in tools if name != FINISH_TOOL]
    return _call(run, State(messages=opening(spec, ctx), tools=tools))


def _call(run: Run[Options], state: State) -> CallModel:
    """The next model call: every tool offered, and the answer's schema when there is one."""
    state.phase = "reply"
    state.messages += state.shown
    state.shown = []
    options = run.options
    if options.output_schema is None:
        return CallModel(state=state, messages=state.messages)
    return CallModel(
        state=state,
        messages=state.messages,
        tools=state.tools,
        schema=options.output_schema,
        schema_name=options.schema_name,
    )


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
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    state.messages.append(message)
    if not reply.tool_calls:
        return Finish(state=state, status=AgentStatus.COMPLETED, output=reply.content or "", data=reply.parsed)

    parsed: list[tuple[ToolCall, dict[str, Any]]] = []
    usable = list(reply.offered) if reply.offered is not None else state.tools
    for call in reply.tool_calls:
        if call.name not in usable:  # a name it made up: told so, as a tool's error, and asked again
            said = f"error: there is no tool {call.name!r}; the tools you may call are: {', '.join(usable)}"
            state.messages.append(_tool_message(call.id, said))
            continue
        try:
            args = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as e:
            return _broken(state, f"model sent malformed arguments for tool {call.name!r}: {e}")
        if not isinstance(args, dict):
            return _broken(state, f"model sent non-object arguments for tool {call.name!r}")
        parsed.append((call, args))

    for call, args in parsed:
        if call.name == FINISH_TOOL:
            return Finish(state=state, status=AgentStatus.COMPLETED, output=str(args.get("answer", "")))

    others = [call for call, _ in parsed if call.name not in SPAWN_TOOLS]
    for call, args in parsed:
        if call.name in SPAWN_TOOLS:
            _plan_spawn(state, call, args)
    if others:
        state.phase = "tools"
        return RunTools(state=state, calls=others)
    return _next(run, state)


def _on_tools(run: Run[Options], state: State, outcome: ToolResults) -> Action:
    for call_id, text in outcome.results.items():
        state.messages.append(_tool_message(call_id, text))
    if outcome.shown is not None:  # sent once this reply's spawns have answered too
        state.shown.append(outcome.shown)
    return _next(run, state)


def _plan_spawn(state: State, call: ToolCall, args: dict[str, Any]) -> None:
    """Queue a spawn call's children, or answer the call at once with what is wrong."""
    raw = args.get("agents") if call.name == "spawn_agents" else [args]
    try:
        children = [_child(item) for item in raw or []]
        if not children:
            raise ValueError("no agents given")
    except (TypeError, ValueError) as e:
        state.messages.append(_tool_message(call.id, f"error: {e}"))
        return
    state.spawns.append(PendingSpawn(call_id=call.id, single=call.name == "delegate", children=children))


def _child(item: Any) -> ChildRequest:
    if not isinstance(item, dict) or not isinstance(item.get("task"), str) or not item["task"].strip():
        raise ValueError("each agent needs a non-empty 'task'")
    tools = item.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise ValueError("'tools' must be a list of tool names")
        check_names(tools)
    strategy = item.get("strategy")
    if strategy is not None and not isinstance(strategy, str):
        raise ValueError("'strategy' must be a strategy's name")
    timeout = item.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_CHILD_SECONDS
    ):
        raise ValueError(f"'timeout' must be seconds, more than 0 and at most {MAX_CHILD_SECONDS}")
    return ChildRequest(
        task=item["task"],
        role=str(item.get("role") or "agent")[:64],
        instructions=str(item.get("instructions") or ""),
        tools=tools,
        strategy=strategy or None,
        timeout=None if timeout is None else float(timeout),
    )


def _next(run: Run[Options], state: State) -> Action:
    if state.spawns:
        state.phase = "children"
        return Spawn(state=state, children=[c for s in state.spawns for c in s.children])
    return _call(run, state)


def _on_children(run: Run[Options], state: State, outcome: ChildResults) -> Action:
    results = iter(outcome.results)
    for spawn in state.spawns:
        summaries = [next(results).summary().model_dump(mode="json", exclude_none=True) for _ in spawn.children]
        body = summaries[0] if spawn.single else summaries
        state.messages.append(_tool_message(spawn.call_id, json.dumps(body)))
    state.spawns = []
    return _call(run, state)


def _tool_message(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _broken(state: State, error: str) -> Finish:
    return Finish(state=state, status=AgentStatus.FAILED, error=error, cause=Cause(kind=CauseKind.MALFORMED_REPLY))
