"""plan_execute: plan the task as a DAG of steps, run each step as soon as its
dependencies are done, answer from the results.

1. A planner call (JSON schema ``plan``, no tools) returns steps, each run by an
   agent of a role (a ``react`` child given the step's input as its task) or by a
   worker tool (``calculator``...) run directly on its input. ``covey.orchestration.plan``
   validates the plan before anything runs; a refused plan goes back to the
   planner with the reason.
2. Every ready step is dispatched at once: tool steps through ``RunTools``, agent
   steps as a ``Spawn(join="each")`` splitting ``wave_share`` of this agent's
   budget. Each child's result is taken as it finishes, and the steps it makes
   ready are dispatched while the others still run. A step's ``{{id.result}}``
   references are resolved before it is dispatched.
3. A failed step stops new dispatches; once the steps running have finished, the
   planner plans what is left, seeing the completed results and the failures;
   completed steps are kept and never run again. Refused plans and failed steps
   share one ``max_replans`` allowance. A step stopped by its budget, a deadline
   or a cancel ends the agent with that status at once (the worker cancels the
   steps still running): a new plan would buy it neither budget nor time.
4. A last call (plain text, no tools) answers the task from the results.

Every step leaves an audit record in the result's ``data["steps"]``, in the order
steps ended, with its start and end: an agent step's child's, a tool step's call
as the worker ran it (none for a call replayed after a crash: a strategy has no
clock of its own). ``covey plan JOB`` prints it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
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
_ENDED = (AgentStatus.COMPLETED, AgentStatus.FAILED)  # a step's own ends; any other stops the agent


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_replans: int = Field(
        default=3, ge=0, le=20, description="planner calls after the first, for refused plans and failed steps alike"
    )
    max_steps: int = Field(default=8, ge=1, le=50, description="steps one plan may have; a longer plan is refused")
    wave_share: float = Field(
        default=0.5, gt=0, le=1, description="share of this agent's budget the agent steps dispatched together split"
    )


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
    """What the planner was told, the plan, the steps running, and every result so far.

    ``phase`` is what it waits for: the planner's reply, tool steps, the next agent
    step to finish, or the answer."""

    phase: Literal["plan", "tools", "agents", "answer"] = "plan"
    messages: list[dict[str, Any]]
    steps: list[plan.Step] = Field(default_factory=list)
    inputs: dict[str, str] = Field(default_factory=dict)  # the plan's dispatched steps' inputs, by id
    tools: list[str] = Field(default_factory=list)  # the tool steps running now
    running: list[str] = Field(default_factory=list)  # the agent steps whose children run
    failed: list[StepRecord] = Field(default_factory=list)  # this plan's failed steps: a replan is due
    results: dict[str, str] = Field(default_factory=dict)  # a completed step's whole result, by id
    records: list[StepRecord] = Field(default_factory=list)
    replans: int = 0
    errors: list[str] = Field(default_factory=list)


def start(spec: AgentSpec, ctx: RunContext) -> Action:
    run = Run.of(Options, spec, ctx)
    system, *conversation = opening(spec, ctx)
    system = {"role": "system", "content": system["content"] + "\n\n" + _guide(_limits(run))}
    return _ask_planner(run, State(messages=[system, *conversation]))


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


def _ask_planner(run: Run[Options], state: State) -> CallModel:
    state.phase = "plan"
    asked = plan.schema(_limits(run), state.results)
    return CallModel(state=state, messages=state.messages, tools=[], schema=asked, schema_name=SCHEMA_NAME)


def _on_plan(run: Run[Options], state: State, reply: ModelReply) -> Action:
    state.messages.append({"role": "assistant", "content": reply.content})
    try:
        state.steps = plan.validate(reply.parsed["steps"], _limits(run), state.results)
    except plan.PlanError as e:
        return _replan(run, state, f"plan refused: {e}", f"Your plan was refused: {e}. Send a corrected plan.")
    return _dispatch(run, state)


def _replan(run: Run[Options], state: State, reason: str, prompt: str) -> Action:
    """Ask the planner again with ``prompt``, or end failed once the replans are spent."""
    state.errors.append(reason)
    state.inputs, state.failed = {}, []
    if state.replans >= run.options.max_replans:
        return _end(state, AgentStatus.FAILED, f"{reason} (no replans left of max_replans={run.options.max_replans})")
    state.replans += 1
    state.messages.append({"role": "user", "content": prompt})
    return _ask_planner(run, state)


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


def _dispatch(run: Run[Options], state: State) -> Action:
    """Dispatch every ready step not yet running, tool steps first; wait for the next
    agent step while some run; replan once a failure's siblings are done; answer once
    every step is. A validated plan has a ready or running step until all are done."""
    if state.failed:
        return _wait(state) if state.running else _replan_failed(run, state)
    ready = [s for s in plan.ready(state.steps, state.results) if s.id not in state.inputs]
    tools = [s for s in ready if s.tool]
    now = tools or ready  # tool steps run in this task, so what they make ready joins the agents after them
    state.inputs |= {s.id: plan.resolve(s.input, state.results, _escape(s.tool)) for s in now}
    if tools:
        state.tools = [s.id for s in tools]
        state.phase = "tools"
        return RunTools(state=state, calls=[_tool_call(s.id, s.tool or "", state.inputs[s.id]) for s in tools])
    if now:
        return _spawn(run, state, now)
    return _wait(state) if state.running else _synthesise(run, state)


def _escape(tool: str | None) -> Callable[[str], str]:
    """A tool step whose input is its JSON arguments gets its references JSON-escaped."""
    return plan.json_escaped if tool is not None and len(_required(tool)) != 1 else str


def _tool_call(step_id: str, tool: str, text: str) -> ToolCall:
    """A tool of one argument takes the input as it; any other takes it as its JSON
    arguments, and the worker's tool reports it when they are not JSON."""
    required = _required(tool)
    arguments = json.dumps({required[0]: text}) if len(required) == 1 else text
    return ToolCall(id=step_id, name=tool, arguments=arguments)


def _spawn(run: Run[Options], state: State, steps: list[plan.Step]) -> Spawn:
    share = run.options.wave_share / len(steps)
    children = [
        ChildRequest(
            task=state.inputs[s.id],
            role=s.role or "",
            instructions=s.description,
            strategy=STEP_STRATEGY,
            fraction=share,
            key=s.id,
        )
        for s in steps
    ]
    state.running += [s.id for s in steps]
    state.phase = "agents"
    return Spawn(state=state, children=children, join="each")


def _wait(state: State) -> Spawn:
    """Wait for the next agent step to finish."""
    state.phase = "agents"
    return Spawn(state=state, children=[], join="each")


def _on_tools(run: Run[Options], state: State, outcome: ToolResults) -> Action:
    """Record the tool steps (a tool reports failure as ``error: ...``), then dispatch
    what they made ready."""
    by_id = _by_id(state)
    for step_id in state.tools:
        text = outcome.results.get(step_id, "error: the tool gave no result")
        ran = outcome.ran.get(step_id)
        if text.startswith("error:"):
            _record(state, by_id[step_id], AgentStatus.FAILED, None, text.removeprefix("error:").strip(), ran=ran)
        else:
            _record(state, by_id[step_id], AgentStatus.COMPLETED, text, None, ran=ran)
    state.tools = []
    return _dispatch(run, state)


def _on_children(run: Run[Options], state: State, outcome: ChildResults) -> Action:
    """Record the agent steps that finished; a stopped one ends the agent, anything
    else goes on to what is ready now."""
    by_id = _by_id(state)
    for key, result in zip(outcome.keys, outcome.results):
        if key not in state.running:
            raise ValueError(f"plan_execute got the result of step {key!r}, which does not run")
        state.running.remove(key)
        _record(state, by_id[key], result.status, result.output, result.error, child=result)
    stopped = next(((k, r) for k, r in zip(outcome.keys, outcome.results) if r.status not in _ENDED), None)
    if stopped is not None:
        key, result = stopped
        return _end(state, result.status, f"step {key} {result.status.value}: {result.error}")
    return _dispatch(run, state)


def _replan_failed(run: Run[Options], state: State) -> Action:
    reason = "; ".join(f"step {r.id} failed: {r.error}" for r in state.failed)
    return _replan(run, state, reason, _failure_prompt(state, state.failed))


def _record(
    state: State,
    step: plan.Step,
    status: AgentStatus,
    output: str | None,
    error: str | None,
    child: AgentResult | None = None,
    ran: tuple[datetime, datetime] | None = None,
) -> None:
    """Append the step's audit record, and keep a completed step's result in full
    (a failed one's record, until the replan). Its times: its child's, or when its
    tool call ran (``ran``)."""
    if status is AgentStatus.COMPLETED:
        state.results[step.id] = output or ""
    started, finished = (child.started_at, child.finished_at) if child else ran or (None, None)
    record = StepRecord(
        id=step.id,
        role=step.role,
        tool=step.tool,
        status=status,
        input=cut(state.inputs[step.id], AUDIT_CHARS),
        output=output and cut(output, AUDIT_CHARS),
        error=error and cut(error, AUDIT_CHARS),
        agent_id=child.agent_id if child else None,
        started_at=started.isoformat() if started else None,
        finished_at=finished.isoformat() if finished else None,
    )
    state.records.append(record)
    if status is AgentStatus.FAILED:
        state.failed.append(record)


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


def _by_id(state: State) -> dict[str, plan.Step]:
    return {s.id: s for s in state.steps}


def _kind(record: StepRecord) -> str:
    return f"role {record.role}" if record.role else f"tool {record.tool}"
