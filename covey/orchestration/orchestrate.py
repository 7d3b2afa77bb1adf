"""orchestrate: a root that plans, delegates to named specialists in rounds, and decides.

One planning call (no tools, JSON ``assignments``) picks which specialists work and
gives each a task. Then a round: analysis specialists run as one concurrent wave;
write specialists run one at a time, in the planned order, each seeing the
analysis reports; last, the qa specialists verify in one wave, each answering a
verdict (``qa_verdict``: passed, findings). A verdict that did not pass starts
another round of the same assignments, every task carrying the findings, up to
``max_rounds``; a qa specialist that gives no verdict (it failed) sends nothing
round. Every specialist is a ``react`` child that cannot spawn (see
``covey.orchestration.specialists``) with an even share of the budget. Last, one
decision call (JSON ``decision``) reads the last round's short reports, never the
transcripts, and its ``answer`` is the result. A specialist that fails or is
refused still reports, saying so, and the orchestrator decides all the same.
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
QA_VERDICT = "qa_verdict"
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


QA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "passed": {"type": "boolean", "description": "whether the written result is right"},
        "findings": {"type": "string", "description": "what is wrong and must be fixed, or what was checked"},
    },
    "required": ["passed", "findings"],
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
    max_rounds: int = Field(default=2, ge=1, le=5, description="rounds at most, a failed qa verdict starting the next")

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


class Verdict(BaseModel):
    """What one qa specialist found in one round."""

    specialist: str
    passed: bool
    findings: str


class State(StrategyState):
    """The conversation, the plan's assignments, their reports in this round as they
    come in, the waves of the round still to run and the one running, the round
    and the qa verdicts of every round so far.

    ``phase`` is what it waits for: the plan, a wave of specialists, or the decision."""

    phase: Literal["plan", "delegate", "decide"] = "plan"
    messages: list[dict[str, Any]]
    assignments: list[Assignment] = Field(default_factory=list)
    reports: list[Report | None] = Field(default_factory=list)
    waves: list[list[int]] = Field(default_factory=list)  # indices of the assignments, by wave
    running: list[int] = Field(default_factory=list)
    fraction: float = 0.0  # of this agent's budget, each specialist's share
    round: int = 1
    verdicts: list[list[Verdict]] = Field(default_factory=list)  # by round


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
            "task": {"type": "string", "description": "all the specialist will see"},
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
        "in the order you list them, and are shown the analysis reports; qa specialists verify the "
        "written result last, and a failed verification sends the work round again with its findings.\n"
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
    # Every specialist asks the same share of the parent's budget for every round
    # it may run, and one share is left over for the decision call.
    state.fraction = 1 / (len(state.assignments) * options.max_rounds + 1)
    return _next(options, state)


def _waves(assignments: list[Assignment]) -> list[list[int]]:
    """Indices of the assignments by wave: every analysis one at once, then each
    write one alone, in planned order, then every qa one at once."""
    analysis = [i for i, a in enumerate(assignments) if a.kind == "analysis"]
    writes = [[i] for i, a in enumerate(assignments) if a.kind == "write"]
    qa = [i for i, a in enumerate(assignments) if a.kind == "qa"]
    return ([analysis] if analysis else []) + writes + ([qa] if qa else [])


def _next(options: Options, state: State) -> Action:
    """The next wave of specialists; once the round is done, another round when a
    qa verdict failed and rounds are left, else the decision."""
    if not state.waves:
        failed = [v for v in (state.verdicts[-1] if state.verdicts else []) if not v.passed]
        if not failed or state.round >= options.max_rounds:
            return _decide(state)
        state.round += 1
        state.reports = [None] * len(state.assignments)
        state.waves = _waves(state.assignments)
    state.phase, state.running = "delegate", state.waves.pop(0)
    by_name = {s.name: s for s in options.specialists}
    children = [
        request(by_name[state.assignments[i].specialist], _task(state, i), state.fraction, _options(state, i))
        for i in state.running
    ]
    return Spawn(state=state, children=children)


def _options(state: State, index: int) -> dict[str, Any]:
    """A qa specialist answers a verdict; the others answer in prose."""
    if state.assignments[index].kind != "qa":
        return {}
    return {"schema": QA_SCHEMA, "schema_name": QA_VERDICT}


def _task(state: State, index: int) -> str:
    """The assignment's task, with the findings of the last round's failed verdicts
    from the second round on; a write step also gets the analysis reports and a qa
    step the write reports, which are all in by the time it runs."""
    assignment = state.assignments[index]
    text = assignment.task
    if state.round > 1:
        failed = [f"- {v.specialist}: {v.findings}" for v in state.verdicts[-1] if not v.passed]
        text += f"\n\nRound {state.round}: verification failed in round {state.round - 1}. Findings:\n"
        text += "\n".join(failed)
    shown = {"write": "analysis", "qa": "write"}.get(assignment.kind)
    if shown is None:
        return text
    found = [
        f"- {a.specialist} ({r.status.value}): {r.report}"
        for a, r in zip(state.assignments, state.reports)
        if a.kind == shown and r is not None
    ]
    if assignment.kind == "qa":
        text += f"\n\nQA round {state.round}: verify the written result."
    return text + (f"\n\n{shown.capitalize()} reports:\n" + "\n".join(found) if found else "")


def _on_reports(run: Run[Options], state: State, outcome: ChildResults) -> Action:
    verdicts = []
    for index, result in zip(state.running, outcome.results):
        state.reports[index] = _report(result, run.options.report_chars)
        verdict = _verdict(state.assignments[index], result)
        if verdict is not None:
            verdicts.append(verdict)
    if any(state.assignments[i].kind == "qa" for i in state.running):
        state.verdicts.append(verdicts)
    state.running = []
    return _next(run.options, state)


def _verdict(assignment: Assignment, result: AgentResult) -> Verdict | None:
    """A qa specialist's verdict; ``None`` for another kind or one that gave none."""
    data = result.data
    if assignment.kind != "qa" or not result.ok or not isinstance(data, dict):
        return None
    if not isinstance(data.get("passed"), bool):
        return None
    return Verdict(specialist=assignment.specialist, passed=data["passed"], findings=str(data.get("findings", "")))


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
        "rounds": state.round,
        "verdicts": [[v.model_dump() for v in verdicts] for verdicts in state.verdicts],
        "decision": decision,
    }
    return Finish(state=state, status=AgentStatus.COMPLETED, output=decision["answer"], data=data)
