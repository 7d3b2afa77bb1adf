"""debate: several debaters propose, critique each other, and revise until they agree.

One wave of ``num_debaters`` proposers (``single`` children answering the
``proposal`` schema: answer, confidence, reasoning), then critique rounds: every
debater still in the running scores every OTHER one's current answer
(``critique`` schema: a score in [0, 1] per other debater, keyed by its index,
and its reasoning). The winner is chosen by ``covey.orchestration.debate_scoring``.

``mode = "revise"`` (the default) debates: after a critique round without
consensus, each debater is shown the others' answers and the critiques and
revises its own (``revision`` schema: answer, confidence, what changed), and the
revised answers are critiqued again; at most ``num_rounds`` revisions. It stops
at the first critique round whose verdict reaches consensus, so no further round
is paid for, and it judges on the latest round's scores alone (earlier ones scored
answers since revised). ``mode = "score"`` never revises: ``num_rounds`` critique
rounds re-score the same proposals, a critic from the second round on also sees
the mean scores of the round before, and the verdict counts every round.

What a failure costs: a debater whose proposal failed or was refused is out of
the running (it neither critiques nor is scored) and ``data.dropped`` says why; a
critique that failed or was refused only loses that round's scores of that critic
(``silent`` in its round); a revision that failed keeps the debater's answer as it
was. Critique rounds need two proposals: with fewer they are skipped. With no
proposal at all the debate fails saying why each debater has none.

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

    mode: Literal["revise", "score"] = Field(
        default="revise", description="revise: debaters revise their answers until they agree; score: never revise"
    )
    num_debaters: int = Field(default=3, ge=2, le=10, description="debaters proposing in parallel")
    num_rounds: int = Field(
        default=2, ge=0, le=5, description="revise: revisions at most; score: critique rounds after the proposals"
    )
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


class Revision(BaseModel):
    """What a debater answers when it revises; its JSON Schema is the one it is asked for."""

    model_config = ConfigDict(extra="forbid")

    answer: str = Field(description="your revised answer to the task, and nothing else")
    confidence: float = Field(ge=0, le=1, description="how sure you now are that the answer is right")
    changed: str = Field(description="what you changed and why, or why you kept your answer")


REVISION_SCHEMA = Revision.model_json_schema()


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
        f"{_debater(index, count)}: propose an answer to the task below, with your confidence in it "
        f"from 0 to 1 and your reasoning.\n\nTask:\n{task}\n\n{_part(index, count)}"
    )


def critic_task(
    task: str, index: int, count: int, round_: int, proposals: dict[str, Any], previous: dict[str, float] | None
) -> str:
    """A critic's task: the proposals (its own among them) as one line of JSON,
    and from the second round on the mean scores of the round before."""
    lines = [
        f"{_debater(index, count)}, critique round {round_}: score every other debater's proposal "
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


def reviser_task(
    task: str, index: int, count: int, revision: int, proposals: dict[str, Any], critiques: dict[str, Any]
) -> str:
    """A reviser's task: every current answer (its own among them) and the last
    round's critiques, each on one line of JSON."""
    lines = [
        f"{_debater(index, count)}, revision {revision}: the debaters disagree. Read the other debaters' "
        f"answers and the critiques below, then give your revised answer to the task (debater {index}), "
        "your confidence in it from 0 to 1 and what you changed.",
        "",
        "Task:",
        task,
        "",
        f"Proposals (JSON, by debater index): {json.dumps(proposals)}",
        f"Critiques (JSON, by critic index): {json.dumps(critiques)}",
    ]
    return "\n".join([*lines, "", _part(index, count)])


def _debater(index: int, count: int) -> str:
    """How a debater is named to itself: by the index the JSON below keys it by, said
    to count from 0 (``Debater 0 of 2`` beside ``(part 1 of 2)`` read as two numberings)."""
    return f"Debater {index} (of {count}, numbered from 0)"


def _part(index: int, count: int) -> str:
    return f"(part {index + 1} of {count})"


class Round(BaseModel):
    """One critique round: each critic's scores by target, and why the silent gave none."""

    scores: dict[int, dict[int, float]] = Field(default_factory=dict)
    reasons: dict[int, str] = Field(default_factory=dict)
    silent: dict[int, str] = Field(default_factory=dict)


class State(StrategyState):
    """The current proposals (``None`` for a debater out of the running; a revision
    replaces its debater's), why each of those is out, the rounds scored so far,
    the revisions made, the debaters of the wave running and how many waves ran.

    ``phase`` is the wave it waits for: the proposals, critiques or revisions."""

    phase: Literal["proposals", "critiques", "revisions"] = "proposals"
    round: int = 0
    wave: int = 0
    proposals: list[Proposal | None] = Field(default_factory=list)
    dropped: dict[int, str] = Field(default_factory=dict)
    rounds: list[Round] = Field(default_factory=list)
    revisions: list[dict[int, Revision]] = Field(default_factory=list)
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
            ("revisions", ChildResults): _on_revisions,
        },
    )


def _waves(options: Options) -> int:
    """Waves a debate runs at most: the proposals, then the critique rounds and, when
    revising, a revision before every critique round but the first."""
    if options.mode == "score":
        return 1 + options.num_rounds
    return 2 + 2 * options.num_rounds


def _child(
    options: Options, *, wave: int, width: int, role: str, task: str, schema: dict[str, Any], schema_name: str
) -> ChildRequest:
    """A ``single`` child of wave ``wave``. It asks for an even share of what is
    left for this wave and the ones after it, so early waves cannot starve later ones."""
    waves_left = max(1, _waves(options) - wave)
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
            scored.reasons[critic] = str(result.data.get("reasoning", ""))
        else:
            scored.silent[critic] = _why(result, "gave no valid score")
    state.rounds.append(scored)
    return _next(run, state)


def _on_revisions(run: Run[Options], state: State, outcome: ChildResults) -> Action:
    """Each reviser's answer replaces its proposal; one that gave none keeps it."""
    made: dict[int, Revision] = {}
    for debater, result in zip(state.critics, outcome.results):
        try:
            revision = Revision.model_validate(result.data) if result.ok else None
        except ValidationError:
            revision = None
        if revision is not None:
            made[debater] = revision
            state.proposals[debater] = Proposal(
                answer=revision.answer, confidence=revision.confidence, reasoning=revision.changed
            )
    state.revisions.append(made)
    return _critique_wave(run, state, _running(state))


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
    if len(running) < 2:
        return _verdict(run.options, state, running)
    if run.options.mode == "score":
        if state.round < run.options.num_rounds:
            return _critique_wave(run, state, running)
        return _verdict(run.options, state, running)
    if not state.rounds:
        return _critique_wave(run, state, running)
    if _decide(run.options, state, running).consensus or len(state.revisions) >= run.options.num_rounds:
        return _verdict(run.options, state, running)
    return _revision_wave(run, state, running)


def _revision_wave(run: Run[Options], state: State, running: dict[int, Proposal]) -> Spawn:
    state.phase = "revisions"
    state.wave += 1
    state.critics = alive = list(running)
    proposals = _by_key({i: p.model_dump() for i, p in running.items()})
    last = state.rounds[-1]
    critiques = _by_key(
        {c: {"scores": _by_key(last.scores[c]), "reasoning": last.reasons.get(c, "")} for c in last.scores}
    )
    count = run.options.num_debaters
    children = [
        _child(
            run.options,
            wave=state.wave,
            width=len(alive),
            role="reviser",
            task=reviser_task(run.spec.task, i, count, len(state.revisions) + 1, proposals, critiques),
            schema=REVISION_SCHEMA,
            schema_name="revision",
        )
        for i in alive
    ]
    return Spawn(state=state, children=children)


def _critique_wave(run: Run[Options], state: State, running: dict[int, Proposal]) -> Spawn:
    state.phase = "critiques"
    state.round += 1
    state.wave += 1
    state.critics = alive = list(running)
    proposals = _by_key({i: p.model_dump() for i, p in running.items()})
    previous = None
    if state.rounds and run.options.mode == "score":
        previous = _by_key(debate_scoring.peer_means([state.rounds[-1].scores], alive))
    count = run.options.num_debaters
    children = [
        _child(
            run.options,
            wave=state.wave,
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


def _decide(options: Options, state: State, running: dict[int, Proposal]) -> debate_scoring.Verdict:
    """The verdict on the current answers: over every round when scoring, over the
    latest round alone when revising (the earlier ones scored answers since revised)."""
    rounds = state.rounds if options.mode == "score" else state.rounds[-1:]
    return debate_scoring.decide(
        [r.scores for r in rounds],
        {i: p.confidence for i, p in running.items()},
        peer_weight=options.peer_weight,
        confidence_weight=options.confidence_weight,
        threshold=options.consensus_threshold,
    )


def _verdict(options: Options, state: State, running: dict[int, Proposal]) -> Finish:
    verdict = _decide(options, state, running)
    winning = running[verdict.winner]
    data = {
        "consensus": verdict.consensus,
        "winner": verdict.winner,
        "proposal": winning.model_dump(),
        "proposals": _by_key({i: p.model_dump() for i, p in running.items()}),
        "dropped": _by_key(state.dropped),
        "rounds": [r.model_dump(mode="json") for r in state.rounds],
        "revisions": [_by_key({i: r.model_dump() for i, r in made.items()}) for made in state.revisions],
        "mode": options.mode,
        "peer_means": _by_key(verdict.peer_means),
        "combined": _by_key(verdict.combined),
        "consensus_threshold": options.consensus_threshold,
        "peer_weight": options.peer_weight,
        "confidence_weight": options.confidence_weight,
    }
    return Finish(state=state, status=AgentStatus.COMPLETED, output=winning.answer, data=data)
