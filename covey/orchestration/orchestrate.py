"""orchestrate: a root that plans, delegates to named specialists, and decides.

One planning call (no tools, JSON ``assignments``) picks which specialists work and
gives each a task. Analysis specialists then run as one concurrent wave; write
specialists run afterwards one at a time, in the planned order, each seeing the
analysis reports, so no two writers touch the workspace at once. Every specialist
is a ``react`` child that cannot spawn (see ``covey.orchestration.specialists``)
with an even share of the budget. Last, one decision call (JSON ``decision``) reads
the specialists' short reports, never their transcripts, and its ``answer`` is the
result. A specialist that fails or is refused still reports, saying so, and the
orchestrator decides all the same.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from covey.context import RunContext
from covey.models.replies import ModelReply
from covey.orchestration import states
from covey.orchestration.actions import Action, CallModel, ChildResults, Finish, Outcome, Spawn
from covey.orchestration.prompts import opening
from covey.orchestration.specialists import BUILTIN, Kind, Specialist, duplicate_names, request
from covey.orchestration.states import Run, StrategyState
from covey.results import AgentResult
from covey.status import AgentStatus
from covey.wire import cut

if TYPE_CHECKING:
    from covey.spec import AgentSpec

NAME = "orchestrate"

ASSIGNMENTS = "assignments"
DECISION = "decision"
# Each prompt ends with one line of JSON after these labels, so a model (and the
# sim's script) reads the roster and the reports as data rather than prose.
ROSTER_LABEL = "Specialists: "
REPORTS_LABEL = "Reports: "

DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "description": "the final answer to the task"},
        "rationale": {"type": "string", "description": "which reports it rests on, and why"},
    },
    "required": ["answer", "rationale"],
    "additionalProperties": False,
}


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    specialists: list[Specialist] = Field(
        default_factory=lambda: list(BUILTIN),
        min_length=1,
        description="who may be assigned work; names must be unique",
    )
    max_specialists: int = Field(default=4, ge=1, description="assignments the plan may make")
    report_chars: int = Field(default=600, ge=20, description="a report is cut to this many characters")

    @field_validator("specialists")
    @classmethod
    def _unique_names(cls, value: list[Specialist]) -> list[Specialist]:
        duplicates = duplicate_names(value)
        if duplicates:
            raise ValueError(f"duplicate specialist names: {', '.join(duplicates)}")
        return value


class Assignment(BaseModel):
    specialist: str
    kind: Kind
    task: str


class Report(BaseModel):
    """What the orchestrator learns of one specialist."""

    agent_id: str
    status: AgentStatus
    report: str


class State(StrategyState):
    """The conversation, the plan's assignments, their reports as they come in, the
    waves still to run and the one running.

    ``phase`` is what it waits for: the plan, a wave of specialists, or the decision."""

    phase: Literal["plan", "delegate", "decide"] = "plan"
    messages: list[dict[str, Any]]
    assignments: list[Assignment] = Field(default_factory=list)
    reports: list[Report | None] = Field(default_factory=list)
    waves: list[list[int]] = Field(default_factory=list)  # indices of the assignments, by wave
    running: list[int] = Field(default_factory=list)
    fraction: float = 0.0  # of this agent's budget, each specialist's share


def start(spec: AgentSpec, ctx: RunContext) -> Action:
    options = Run.of(Options, spec, ctx).options
    state = State(messages=[*opening(spec, ctx), {"role": "user", "content": _planning_prompt(options)}])
    return CallModel(
        state=state, messages=state.messages, tools=[], schema=assignments_schema(options), schema_name=ASSIGNMENTS
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
            ("plan", ModelReply): _on_plan,
            ("delegate", ChildResults): _on_reports,
            ("decide", ModelReply): _on_decision,
        },
    )


def assignments_schema(options: Options) -> dict[str, Any]:
    """The plan's JSON Schema: only known specialists, at most ``max_specialists``."""
    assignment = {
        "type": "object",
        "properties": {
            "specialist": {"type": "string", "enum": [s.name for s in options.specialists]},
            "task": {"type": "string", "minLength": 1, "description": "all the specialist will see"},
        },
        "required": ["specialist", "task"],
        "additionalProperties": False,
    }
    items = {"type": "array", "items": assignment, "minItems": 1, "maxItems": options.max_specialists}
    return {
        "type": "object",
        "properties": {"assignments": items},
        "required": ["assignments"],
        "additionalProperties": False,
    }


def _planning_prompt(options: Options) -> str:
    roster = [{"name": s.name, "kind": s.kind, "role": s.role, "tools": s.tools} for s in options.specialists]
    return (
        f"Plan this task for your specialists. Assign it to at most {options.max_specialists} of them, "
        "each with a self-contained task: a specialist sees only its task, never this conversation. "
        "Analysis specialists run at the same time; write specialists run after them, one at a time "
        "in the order you list them, and are shown the analysis reports.\n"
        f"{ROSTER_LABEL}{json.dumps(roster)}"
    )


def _on_plan(run: Run[Options], state: State, reply: ModelReply) -> Action:
    """Record the plan and start its first wave. A specialist assigned twice keeps
    its first task: one specialist, one report."""
    options = run.options
    state.messages.append({"role": "assistant", "content": reply.content})
    kinds = {s.name: s.kind for s in options.specialists}
    first: dict[str, str] = {}
    for item in reply.parsed["assignments"]:
        first.setdefault(item["specialist"], item["task"])
    state.assignments = [Assignment(specialist=n, kind=kinds[n], task=t) for n, t in first.items()]
    state.reports = [None] * len(state.assignments)
    state.waves = _waves(state.assignments)
    # Every specialist asks the same share of the parent's budget, and one
    # share is left over for the decision call.
    state.fraction = 1 / (len(state.assignments) + 1)
    return _next(options, state)


def _waves(assignments: list[Assignment]) -> list[list[int]]:
    """Indices of the assignments by wave: every analysis one at once, then each
    write one alone, in planned order."""
    analysis = [i for i, a in enumerate(assignments) if a.kind == "analysis"]
    writes = [[i] for i, a in enumerate(assignments) if a.kind == "write"]
    return ([analysis] if analysis else []) + writes


def _next(options: Options, state: State) -> Action:
    """The next wave of specialists, or the decision once every one has reported."""
    if not state.waves:
        return _decide(state)
    state.phase, state.running = "delegate", state.waves.pop(0)
    by_name = {s.name: s for s in options.specialists}
    children = [
        request(by_name[state.assignments[i].specialist], _task(state, i), state.fraction) for i in state.running
    ]
    return Spawn(state=state, children=children)


def _task(state: State, index: int) -> str:
    """The assignment's task; a write step also gets the analysis reports, which
    are all in by the time any write step runs."""
    assignment = state.assignments[index]
    if assignment.kind != "write":
        return assignment.task
    found = [
        f"- {a.specialist} ({r.status.value}): {r.report}"
        for a, r in zip(state.assignments, state.reports)
        if a.kind == "analysis" and r is not None
    ]
    return assignment.task + ("\n\nAnalysis reports:\n" + "\n".join(found) if found else "")


def _on_reports(run: Run[Options], state: State, outcome: ChildResults) -> Action:
    for index, result in zip(state.running, outcome.results):
        state.reports[index] = _report(result, run.options.report_chars)
    state.running = []
    return _next(run.options, state)


def _report(result: AgentResult, chars: int) -> Report:
    """What the orchestrator learns of one specialist: its status and its answer,
    or why it has none, cut to ``chars``."""
    summary = result.summary()
    if summary.status is AgentStatus.COMPLETED:
        text = summary.output or ("" if summary.data is None else json.dumps(summary.data))
    else:
        text = f"{summary.status.value}: {summary.error or 'no error given'}"
    return Report(agent_id=summary.agent_id, status=summary.status, report=cut(text, chars))


def _reports(state: State) -> list[dict[str, Any]]:
    return [
        {"specialist": a.specialist, "kind": a.kind, **r.model_dump(mode="json")}
        for a, r in zip(state.assignments, state.reports)
        if r is not None
    ]


def _decide(state: State) -> Action:
    prompt = (
        "Your specialists have reported: each one's status and final answer, or why it has none. "
        "Decide the answer to the task from these reports.\n"
        f"{REPORTS_LABEL}{json.dumps(_reports(state))}"
    )
    state.messages.append({"role": "user", "content": prompt})
    state.phase = "decide"
    return CallModel(state=state, messages=state.messages, tools=[], schema=DECISION_SCHEMA, schema_name=DECISION)


def _on_decision(run: Run[Options], state: State, reply: ModelReply) -> Finish:
    decision = reply.parsed
    data = {
        "assignments": [a.model_dump() for a in state.assignments],
        "reports": _reports(state),
        "decision": decision,
    }
    return Finish(state=state, status=AgentStatus.COMPLETED, output=decision["answer"], data=data)
