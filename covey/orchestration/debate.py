"""debate: several debaters propose, then critique each other; the best-scored wins.

One wave of ``num_debaters`` proposers (``single`` children answering the
``proposal`` schema: answer, confidence, reasoning), then ``num_rounds`` waves in
which every debater still in the running scores every OTHER one's proposal
(``critique`` schema: a score in [0, 1] per other debater, keyed by its index).
Proposals are never revised: each round re-scores the same proposals, and from
the second round on a critic also sees the mean score each proposal got in the
round before, so it may reconsider in the light of the room. The winner is chosen
by ``covey.orchestration.debate_scoring``.

What a failure costs: a debater whose proposal failed or was refused is out of
the running (it neither critiques nor is scored) and ``data.dropped`` says why; a
critique that failed or was refused only loses that round's scores of that critic
(``silent`` in its round). Critique rounds need two proposals: with fewer they are
skipped. With no proposal at all the debate fails saying why each debater has none.

Each child's task carries the original task (so its directives steer the sim) and
ends ``(part I of N)`` with ``I`` the debater's index plus one, so a
``[sim:fail KIND part=I]`` fails that debater's calls alone.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from covey.context import RunContext
from covey.orchestration import debate_scoring, states
from covey.orchestration.actions import Action, ChildRequest, ChildResults, Finish, Outcome, Spawn
from covey.orchestration.states import Run, StrategyState
from covey.results import AgentResult
from covey.status import AgentStatus

if TYPE_CHECKING:
    from covey.spec import AgentSpec

NAME = "debate"
WEIGHT_TOLERANCE = 1e-9  # how far from 1 the two weights may sum, for floats like 0.1 + 0.9


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    num_debaters: int = Field(default=3, ge=2, le=10, description="debaters proposing in parallel")
    num_rounds: int = Field(default=2, ge=0, le=5, description="critique rounds after the proposals")
    consensus_threshold: float = Field(default=0.7, ge=0, le=1, description="combined score the winner needs")
    peer_weight: float = Field(default=0.7, ge=0, le=1, description="weight of the mean peer score")
    confidence_weight: float = Field(default=0.3, ge=0, le=1, description="weight of the debater's own confidence")

    @model_validator(mode="after")
    def _weights_sum_to_one(self) -> Options:
        if abs(self.peer_weight + self.confidence_weight - 1) > WEIGHT_TOLERANCE:
            raise ValueError(
                f"peer_weight ({self.peer_weight}) and confidence_weight ({self.confidence_weight}) must sum to 1"
            )
        return self


class Proposal(BaseModel):
    """What a proposer answers; its JSON Schema is the one the proposer is asked for."""

    model_config = ConfigDict(extra="forbid")

    answer: str = Field(description="your answer to the task, and nothing else")
    confidence: float = Field(ge=0, le=1, description="how sure you are that the answer is right")
    reasoning: str = Field(description="why, briefly")


PROPOSAL_SCHEMA = Proposal.model_json_schema()


def critique_schema(targets: list[int]) -> dict[str, Any]:
    """The critique a critic is asked for: a score for each of ``targets`` (the
    other debaters), keyed by index, and its reasoning."""
    score = {"type": "number", "minimum": 0, "maximum": 1}
    return {
        "type": "object",
        "properties": {
            "scores": {
                "type": "object",
                "description": "for each other debater's index, how right its proposal is, 0 to 1",
                "properties": {str(t): score for t in targets},
                "required": [str(t) for t in targets],
                "additionalProperties": False,
            },
            "reasoning": {"type": "string"},
        },
        "required": ["scores", "reasoning"],
        "additionalProperties": False,
    }


def proposer_task(task: str, index: int, count: int) -> str:
    return (
        f"Debater {index} of {count}: propose an answer to the task below, with your confidence in it "
        f"from 0 to 1 and your reasoning.\n\nTask:\n{task}\n\n{_part(index, count)}"
    )


def critic_task(
    task: str, index: int, count: int, round_: int, proposals: dict[str, Any], previous: dict[str, float] | None
) -> str:
    """A critic's task: the proposals (its own among them) as one line of JSON,
    and from the second round on the mean scores of the round before."""
    lines = [
        f"Debater {index} of {count}, critique round {round_}: score every other debater's proposal "
        f"for the task below from 0 (wrong) to 1 (right), keyed by its index; do not score your own "
        f"(debater {index}).",
        "",
        "Task:",
        task,
        "",
        f"Proposals (JSON, by debater index): {json.dumps(proposals)}",
    ]
    if previous is not None:
        lines.append(f"Mean scores of round {round_ - 1} (JSON, by debater index): {json.dumps(previous)}")
    return "\n".join([*lines, "", _part(index, count)])


def _part(index: int, count: int) -> str:
    return f"(part {index + 1} of {count})"


class Round(BaseModel):
    """One critique round: each critic's scores by target, and why the silent gave none."""

    scores: dict[int, dict[int, float]] = Field(default_factory=dict)
    silent: dict[int, str] = Field(default_factory=dict)


class State(StrategyState):
    """The proposals (``None`` for a debater out of the running), why each of those is
    out, the rounds scored so far and the critics of the round running.

    ``phase`` is the wave it waits for: the proposals, or a round of critiques."""

    phase: Literal["proposals", "critiques"] = "proposals"
    round: int = 0
    proposals: list[Proposal | None] = Field(default_factory=list)
    dropped: dict[int, str] = Field(default_factory=dict)
    rounds: list[Round] = Field(default_factory=list)
    critics: list[int] = Field(default_factory=list)


def start(spec: AgentSpec, ctx: RunContext) -> Action:
    options = Run.of(Options, spec, ctx).options
    count = options.num_debaters
    children = [
        _child(
            options,
            wave=0,
            width=count,
            role="proposer",
            task=proposer_task(spec.task, i, count),
            schema=PROPOSAL_SCHEMA,
            schema_name="proposal",
        )
        for i in range(count)
    ]
    return Spawn(state=State(), children=children)


def resume(spec: AgentSpec, ctx: RunContext, state: State, outcome: Outcome) -> Action:
    return states.resume(
        NAME,
        Options,
        spec,
        ctx,
        state,
        outcome,
        {
            ("proposals", ChildResults): _on_proposals,
            ("critiques", ChildResults): _on_critiques,
        },
    )


def _child(
    options: Options, *, wave: int, width: int, role: str, task: str, schema: dict[str, Any], schema_name: str
) -> ChildRequest:
    """A ``single`` child of wave ``wave``. It asks for an even share of what is
    left for this wave and the ones after it, so early waves cannot starve later ones."""
    waves_left = 1 + options.num_rounds - wave
    return ChildRequest(
        task=task,
        role=role,
        strategy="single",
        tools=[],
        options={"schema": schema, "schema_name": schema_name},
        fraction=1 / (width * waves_left),
    )


def _on_proposals(run: Run[Options], state: State, outcome: ChildResults) -> Action:
    for index, result in enumerate(outcome.results):
        proposal = _proposal(result)
        state.proposals.append(proposal)
        if proposal is None:
            state.dropped[index] = _why(result, "gave no valid proposal")
    return _next(run, state)


def _proposal(result: AgentResult) -> Proposal | None:
    """The proposal of a completed proposer; ``None`` for anything else."""
    if not result.ok:
        return None
    try:
        return Proposal.model_validate(result.data)
    except ValidationError:
        return None


def _on_critiques(run: Run[Options], state: State, outcome: ChildResults) -> Action:
    running = list(_running(state))
    scored = Round()
    for critic, result in zip(state.critics, outcome.results):
        raw = result.data.get("scores") if result.ok and isinstance(result.data, dict) else None
        given = debate_scoring.valid_scores(raw, critic, running)
        if given:
            scored.scores[critic] = given
        else:
            scored.silent[critic] = _why(result, "gave no valid score")
    state.rounds.append(scored)
    return _next(run, state)


def _why(result: AgentResult, fallback: str) -> str:
    return fallback if result.ok else f"{result.status.value}: {result.error}"


def _running(state: State) -> dict[int, Proposal]:
    """The proposals still in the running, by debater index."""
    return {i: p for i, p in enumerate(state.proposals) if p is not None}


def _next(run: Run[Options], state: State) -> Action:
    running = _running(state)
    if not running:
        reasons = "; ".join(f"debater {i} {why}" for i, why in state.dropped.items())
        return Finish(
            state=state,
            status=AgentStatus.FAILED,
            error=f"no debater proposed an answer: {reasons}",
            data={"dropped": _by_key(state.dropped)},
        )
    if state.round < run.options.num_rounds and len(running) >= 2:
        return _critique_wave(run, state, running)
    return _verdict(run.options, state, running)


def _critique_wave(run: Run[Options], state: State, running: dict[int, Proposal]) -> Spawn:
    state.phase = "critiques"
    state.round += 1
    state.critics = alive = list(running)
    proposals = _by_key({i: p.model_dump() for i, p in running.items()})
    previous = None
    if state.rounds:
        previous = _by_key(debate_scoring.peer_means([state.rounds[-1].scores], alive))
    count = run.options.num_debaters
    children = [
        _child(
            run.options,
            wave=state.round,
            width=len(alive),
            role="critic",
            task=critic_task(run.spec.task, i, count, state.round, proposals, previous),
            schema=critique_schema([t for t in alive if t != i]),
            schema_name="critique",
        )
        for i in alive
    ]
    return Spawn(state=state, children=children)


def _by_key(values: dict[int, Any]) -> dict[str, Any]:
    """``values`` keyed as JSON keys them, so ``data`` reads the same before and after it travels."""
    return {str(k): v for k, v in values.items()}


def _verdict(options: Options, state: State, running: dict[int, Proposal]) -> Finish:
    verdict = debate_scoring.decide(
        [r.scores for r in state.rounds],
        {i: p.confidence for i, p in running.items()},
        peer_weight=options.peer_weight,
        confidence_weight=options.confidence_weight,
        threshold=options.consensus_threshold,
    )
    winning = running[verdict.winner]
    data = {
        "consensus": verdict.consensus,
        "winner": verdict.winner,
        "proposal": winning.model_dump(),
        "proposals": _by_key({i: p.model_dump() for i, p in running.items()}),
        "dropped": _by_key(state.dropped),
        "rounds": [r.model_dump(mode="json") for r in state.rounds],
        "peer_means": _by_key(verdict.peer_means),
        "combined": _by_key(verdict.combined),
        "consensus_threshold": options.consensus_threshold,
        "peer_weight": options.peer_weight,
        "confidence_weight": options.confidence_weight,
    }
    return Finish(state=state, status=AgentStatus.COMPLETED, output=winning.answer, data=data)
