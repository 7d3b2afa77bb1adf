"""plan_execute: plan the task as a DAG of steps, run it in waves, answer from the results.

1. A planner call (JSON schema ``plan``, no tools) returns steps, each run by an
   agent of a role (a ``react`` child given the step's input as its task) or by a
   worker tool (``calculator``...) run directly on its input. ``covey.orchestration.plan``
   validates the plan before anything runs; a refused plan goes back to the
   planner with the reason.
2. Each wave runs every ready step at once: tool steps through ``RunTools``, then
   agent steps as one ``Spawn`` splitting ``wave_share`` of this agent's budget.
   A step's ``{{id.result}}`` references are resolved before it is dispatched.
3. A failed step has the planner plan what is left, seeing the completed results
   and the failure; completed steps are kept and never run again. Refused plans
   and failed steps share one ``max_replans`` allowance. A step stopped by its
   budget, a deadline or a cancel ends the agent with that status: a new plan
   would buy it neither budget nor time.
4. A last call (plain text, no tools) answers the task from the results.

Every step leaves an audit record in the result's ``data["steps"]``; agent steps
carry their child's start and end, tool steps none (a strategy has no clock).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from covey.context import RunContext
from covey.models.replies import ModelReply, ToolCall
from covey.orchestration import plan, states
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
from covey.orchestration.prompts import opening
from covey.orchestration.states import Run, StrategyState
from covey.results import AgentResult
from covey.status import AgentStatus
from covey.tools.builtin import CONTROL_TOOLS
from covey.tools.registry import offered, schema
from covey.wire import cut

if TYPE_CHECKING:
    from covey.spec import AgentSpec

NAME = "plan_execute"
SCHEMA_NAME = "plan"
STEP_STRATEGY = "react"
AUDIT_CHARS = 200  # an audit record keeps the start of a step's input, output and error
RESULT_CHARS = 2000  # what the planner and the synthesiser read of one step's result


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_replans: int = Field(
        default=3, ge=0, le=20, description="planner calls after the first, for refused plans and failed steps alike"
    )
    max_steps: int = Field(default=8, ge=1, le=50, description="steps one plan may have; a longer plan is refused")
    wave_share: float = Field(
        default=0.5, gt=0, le=1, description="share of this agent's budget one wave's agent steps split between them"
    )


class Wave(BaseModel):
    """The steps running now, by kind, and the inputs they were dispatched with."""

    tools: list[str]
    agents: list[str]
    inputs: dict[str, str]


class StepRecord(BaseModel):
    """One step run, as the audit log in the result's ``data["steps"]`` shows it."""

    id: str
    role: str | None
    tool: str | None
    status: AgentStatus
    input: str | None
    output: str | None
    error: str | None
    agent_id: str | None
    started_at: str | None
    finished_at: str | None


class State(StrategyState):
    """What the planner was told, the plan, the wave running, and every result so far.

    ``phase`` is what it waits for: the planner's reply, a wave's tool steps or agent
    steps, or the answer."""

    phase: Literal["plan", "tools", "agents", "answer"] = "plan"
    messages: list[dict[str, Any]]
    steps: list[plan.Step] = Field(default_factory=list)
    wave: Wave | None = None
    results: dict[str, str] = Field(default_factory=dict)  # a completed step's whole result, by id
    records: list[StepRecord] = Field(default_factory=list)
    replans: int = 0
    errors: list[str] = Field(default_factory=list)


def start(spec: AgentSpec, ctx: RunContext) -> Action:
    run = Run.of(Options, spec, ctx)
    system, task = opening(spec, ctx)
    system = {"role": "system", "content": system["content"] + "\n\n" + _guide(_limits(run))}
    return _ask_planner(State(messages=[system, task]))


def resume(spec: AgentSpec, ctx: RunContext, state: State, outcome: Outcome) -> Action:
    return states.resume(
        NAME,
        Options,
        spec,
        ctx,
        state,
        outcome,
        {
            ("plan", ModelReply): _on_plan,
            ("tools", ToolResults): _on_tools,
            ("agents", ChildResults): _on_children,
            ("answer", ModelReply): _on_answer,
        },
    )


def _limits(run: Run[Options]) -> plan.Limits:
    tools = frozenset(offered(run.ctx.allow, run.ctx.deny)) - CONTROL_TOOLS
    budget = run.ctx.budget
    return plan.Limits(run.options.max_steps, tools, agents=budget.max_depth >= 1 and budget.max_agents != 0)


# --- planning ------------------------------------------------------------------


def _guide(limits: plan.Limits) -> str:
    """How to plan, told in the system message: the first planner call's last user
    message is then the task itself, and each replan adds one after it."""
    tools = "; ".join(f"{name} (input: {_tool_input(name)})" for name in sorted(limits.tools)) or "none"
    agents = "an agent of that role gets the input as its task" if limits.agents else "not available here"
    return (
        'Plan the task as steps that run as a graph. Answer with JSON {"steps": [...]}; each step has an id '
        f"(letters, digits, _ or -), a description, either a role ({agents}) or a tool (run directly on the "
        "input), the input, and depends_on (ids of the steps that must finish first). Steps whose dependencies are "
        "done run in parallel. Write {{id.result}} in an input to use the result of a step it depends on. "
        f"At most {limits.max_steps} steps. Tools: {tools}."
    )


def _tool_input(name: str) -> str:
    required = _required(name)
    return f"the {required[0]}" if len(required) == 1 else "its arguments as a JSON object"


def _required(tool: str) -> list[str]:
    return schema(tool)["function"]["parameters"].get("required", [])


def _ask_planner(state: State) -> CallModel:
    state.phase = "plan"
    return CallModel(state=state, messages=state.messages, tools=[], schema=plan.PLAN_SCHEMA, schema_name=SCHEMA_NAME)


def _on_plan(run: Run[Options], state: State, reply: ModelReply) -> Action:
    state.messages.append({"role": "assistant", "content": reply.content})
    try:
        state.steps = plan.validate(reply.parsed["steps"], _limits(run), state.results)
    except plan.PlanError as e:
        return _replan(run, state, f"plan refused: {e}", f"Your plan was refused: {e}. Send a corrected plan.")
    return _next_wave(run, state)


def _replan(run: Run[Options], state: State, reason: str, prompt: str) -> Action:
    """Ask the planner again with ``prompt``, or end failed once the replans are spent."""
    state.errors.append(reason)
    state.wave = None
    if state.replans >= run.options.max_replans:
        return _end(state, AgentStatus.FAILED, f"{reason} (no replans left of max_replans={run.options.max_replans})")
    state.replans += 1
    state.messages.append({"role": "user", "content": prompt})
    return _ask_planner(state)


def _failure_prompt(state: State, failed: list[StepRecord]) -> str:
    """What the planner reads after a failure: what failed, what is done, what never ran."""
    done, failed_ids = state.results, {r.id for r in failed}
    lines = ["Steps failed:", *(f"- {r.id} ({_kind(r)}): {r.status.value}: {r.error}" for r in failed)]
    lines.append("Completed steps, whose results you may reference as {{id.result}}; do not plan them again:")
    lines += [f"- {step_id}: {cut(result, RESULT_CHARS)}" for step_id, result in done.items()] or ["- none"]
    left = [s.id for s in state.steps if s.id not in done and s.id not in failed_ids]
    lines += [f"Steps that did not run: {', '.join(left) or 'none'}.", "Plan only what is left."]
    return "\n".join(lines)


# --- execution -----------------------------------------------------------------


def _next_wave(run: Run[Options], state: State) -> Action:
    """Dispatch every ready step, or answer once none is left: a validated plan has
    a ready step until all of its steps are done."""
    wave = plan.ready(state.steps, state.results)
    if not wave:
        return _synthesise(run, state)
    inputs = {s.id: plan.resolve(s.input, state.results, _escape(s.tool)) for s in wave}
    state.wave = Wave(tools=[s.id for s in wave if s.tool], agents=[s.id for s in wave if s.role], inputs=inputs)
    calls = [_tool_call(s.id, s.tool, inputs[s.id]) for s in wave if s.tool]
    if not calls:
        return _spawn(run, state)
    state.phase = "tools"
    return RunTools(state=state, calls=calls)


def _escape(tool: str | None) -> Callable[[str], str]:
    """A tool step whose input is its JSON arguments gets its references JSON-escaped."""
    return plan.json_escaped if tool is not None and len(_required(tool)) != 1 else str


def _tool_call(step_id: str, tool: str, text: str) -> ToolCall:
    """A tool of one argument takes the input as it; any other takes it as its JSON
    arguments, and the worker's tool reports it when they are not JSON."""
    required = _required(tool)
    arguments = json.dumps({required[0]: text}) if len(required) == 1 else text
    return ToolCall(id=step_id, name=tool, arguments=arguments)


def _spawn(run: Run[Options], state: State) -> Spawn:
    wave, by_id = _wave(state), _by_id(state)
    share = run.options.wave_share / len(wave.agents)
    children = [
        ChildRequest(
            task=wave.inputs[step_id],
            role=by_id[step_id].role or "",
            instructions=by_id[step_id].description,
            strategy=STEP_STRATEGY,
            fraction=share,
        )
        for step_id in wave.agents
    ]
    state.phase = "agents"
    return Spawn(state=state, children=children)


def _on_tools(run: Run[Options], state: State, outcome: ToolResults) -> Action:
    """Record the wave's tool steps (a tool reports failure as ``error: ...``), then
    run its agent steps, if any."""
    wave, by_id = _wave(state), _by_id(state)
    for step_id in wave.tools:
        text = outcome.results.get(step_id, "error: the tool gave no result")
        if text.startswith("error:"):
            _record(state, by_id[step_id], AgentStatus.FAILED, None, text.removeprefix("error:").strip())
        else:
            _record(state, by_id[step_id], AgentStatus.COMPLETED, text, None)
    return _spawn(run, state) if wave.agents else _after_wave(run, state)


def _on_children(run: Run[Options], state: State, outcome: ChildResults) -> Action:
    by_id = _by_id(state)
    for step_id, result in zip(_wave(state).agents, outcome.results):
        _record(state, by_id[step_id], result.status, result.output, result.error, child=result)
    return _after_wave(run, state)


def _after_wave(run: Run[Options], state: State) -> Action:
    wave = _wave(state)
    failed = [
        r for r in state.records[-(len(wave.tools) + len(wave.agents)) :] if r.status is not AgentStatus.COMPLETED
    ]
    stopped = next((r for r in failed if r.status is not AgentStatus.FAILED), None)
    if stopped is not None:
        return _end(state, stopped.status, f"step {stopped.id} {stopped.status.value}: {stopped.error}")
    if failed:
        reason = "; ".join(f"step {r.id} failed: {r.error}" for r in failed)
        return _replan(run, state, reason, _failure_prompt(state, failed))
    state.wave = None
    return _next_wave(run, state)


def _record(
    state: State,
    step: plan.Step,
    status: AgentStatus,
    output: str | None,
    error: str | None,
    child: AgentResult | None = None,
) -> None:
    """Append the step's audit record, and keep a completed step's result in full."""
    if status is AgentStatus.COMPLETED:
        state.results[step.id] = output or ""
    started, finished = (child.started_at, child.finished_at) if child else (None, None)
    state.records.append(
        StepRecord(
            id=step.id,
            role=step.role,
            tool=step.tool,
            status=status,
            input=cut(_wave(state).inputs[step.id], AUDIT_CHARS),
            output=output and cut(output, AUDIT_CHARS),
            error=error and cut(error, AUDIT_CHARS),
            agent_id=child.agent_id if child else None,
            started_at=started.isoformat() if started else None,
            finished_at=finished.isoformat() if finished else None,
        )
    )


# --- the answer ----------------------------------------------------------------


def _synthesise(run: Run[Options], state: State) -> CallModel:
    """The last call reads the task and the results, not the planning talk."""
    state.phase = "answer"
    lines = [
        f"- {r.id} ({_kind(r)}): {cut(state.results[r.id], RESULT_CHARS)}"
        for r in state.records
        if r.status is AgentStatus.COMPLETED
    ]
    report = "The plan ran. Results of its steps:\n" + ("\n".join(lines) or "- none")
    ask = {"role": "user", "content": report + "\nAnswer the task from them, in plain text."}
    return CallModel(state=state, messages=[*opening(run.spec, run.ctx), ask], tools=[])


def _on_answer(run: Run[Options], state: State, reply: ModelReply) -> Finish:
    return Finish(state=state, status=AgentStatus.COMPLETED, output=reply.content or "", data=_data(state))


def _end(state: State, status: AgentStatus, error: str) -> Finish:
    return Finish(state=state, status=status, error=error, data=_data(state))


def _data(state: State) -> dict[str, Any]:
    return {
        "steps": [r.model_dump(mode="json") for r in state.records],
        "replans": state.replans,
        "errors": state.errors,
    }


def _wave(state: State) -> Wave:
    """The wave running: set in every phase that waits on one."""
    if state.wave is None:
        raise ValueError(f"plan_execute has no wave running in phase {state.phase!r}")
    return state.wave


def _by_id(state: State) -> dict[str, plan.Step]:
    return {s.id: s for s in state.steps}


def _kind(record: StepRecord) -> str:
    return f"role {record.role}" if record.role else f"tool {record.tool}"
