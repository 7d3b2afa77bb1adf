"""lats: Language Agent Tree Search, Monte Carlo tree search over candidate actions.

Each simulation selects a leaf by UCT, asks the model once for ``num_candidates``
next actions from it (expansion), evaluates every candidate in a sub-agent of one
wave (simulation) and backs each score up the path (backpropagation). An
evaluator carries its path out: it runs ``evaluator_strategy`` (``react`` by
default, with this agent's tools and no spawn tool, at most ``evaluator_max_cycles``
model calls) and answers the evaluation schema. The search stops at an
evaluation that solves the task with a score of at least ``success_threshold``,
after ``num_simulations`` expansions, when no leaf is left above
``max_tree_depth``, or when a whole wave of evaluators was refused for budget.

Then, with ``execute_best`` (the default), one more sub-agent of the same strategy
carries out the best path (the solving one, else the best leaf's) and its answer
is the result; should it fail, the result is the path's evaluated answer and
``data.executed`` says why. Without it the evaluated answer is the result.

The tree lives in the strategy's state (``covey.orchestration.search_tree``), not
in agent depth: every evaluator is a child of this agent, at depth 1 below it.
An evaluator refused for budget, or failing, does not fail the search: its
candidate scores a neutral 0.5 and the result's ``data`` notes why.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from covey.context import RunContext
from covey.models.replies import ModelReply
from covey.orchestration import registry, search_tree, states
from covey.orchestration.actions import Action, CallModel, ChildRequest, ChildResults, Finish, Outcome, Spawn
from covey.orchestration.prompts import opening
from covey.orchestration.states import Run, StrategyState
from covey.results import AgentResult
from covey.status import AgentStatus

if TYPE_CHECKING:
    from covey.spec import AgentSpec

NAME = "lats"

CANDIDATES_SCHEMA_NAME = "lats_candidates"
EVALUATION_SCHEMA_NAME = "lats_evaluation"
EVALUATOR_ROLE = "evaluator"
EXECUTOR_ROLE = "executor"
NEUTRAL_SCORE = 0.5  # an unevaluated candidate neither attracts nor repels the search

EVALUATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "reflection": {"type": "string"},
        "solved": {"type": "boolean"},
        "answer": {"type": "string"},
    },
    "required": ["score", "reflection", "solved", "answer"],
    "additionalProperties": False,
}


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    num_candidates: int = Field(default=3, ge=1, le=10, description="actions proposed per expansion")
    num_simulations: int = Field(default=3, ge=1, le=20, description="expansions before the search stops")
    exploration_weight: float = Field(default=1.41, ge=0, le=10, description="UCT's exploration weight w")
    success_threshold: float = Field(default=0.9, ge=0, le=1, description="score a solving evaluation needs")
    max_tree_depth: int = Field(default=5, ge=1, le=20, description="actions in a path at most")
    seed: int | None = Field(default=None, ge=0, description="tie-break seed; default: from the job and agent ids")
    evaluator_strategy: str = Field(default="react", description="how an evaluator carries its path out")
    evaluator_max_cycles: int = Field(default=4, ge=1, le=50, description="model calls an evaluator may make")
    execute_best: bool = Field(default=True, description="carry the best path out with one more sub-agent")

    @field_validator("evaluator_strategy")
    @classmethod
    def _answers_a_schema(cls, value: str) -> str:
        """An evaluator's verdict is JSON: its strategy must take the ``schema`` option."""
        try:
            registry.strategy(value).Options.model_validate({"schema": EVALUATION_SCHEMA})
        except registry.UnknownStrategy as e:
            raise ValueError(str(e)) from None
        except ValidationError:
            raise ValueError(f"strategy {value!r} takes no schema option, so it cannot answer an evaluation") from None
        return value


def candidates_schema(count: int) -> dict[str, Any]:
    """Exactly ``count`` candidate actions."""
    return {
        "type": "object",
        "properties": {
            "candidates": {
                "type": "array",
                "items": {"type": "string", "description": "one next action, in a sentence"},
                "minItems": count,
                "maxItems": count,
            },
        },
        "required": ["candidates"],
        "additionalProperties": False,
    }


class State(StrategyState):
    """The search: its tie-break seed, the tree, the simulations run, the node being
    expanded and, while its evaluators run, the candidates they judge.

    ``phase`` is what it waits for: the expansion's candidates, their evaluations,
    or the best path carried out (``best`` is that path's node, ``solved`` whether
    it solves the task)."""

    phase: Literal["expand", "evaluate", "execute"] = "expand"
    seed: int
    tree: search_tree.Tree = Field(default_factory=search_tree.new_tree)
    simulations: int = 0
    expanding: int = search_tree.ROOT
    candidates: list[str] = Field(default_factory=list)
    best: int | None = None
    solved: bool = False


def start(spec: AgentSpec, ctx: RunContext) -> Action:
    run = Run.of(Options, spec, ctx)
    seed = run.options.seed if run.options.seed is not None else _seed(ctx)
    return _expand(run, State(seed=seed))


def _seed(ctx: RunContext) -> int:
    """Derived from ids alone, so a replayed agent breaks ties the same way."""
    return int(hashlib.sha256(f"{ctx.job_id}/{ctx.agent_id}".encode()).hexdigest()[:8], 16)


def resume(spec: AgentSpec, ctx: RunContext, state: State, outcome: Outcome) -> Action:
    return states.resume(
        NAME,
        Options,
        spec,
        ctx,
        state,
        outcome,
        {
            ("expand", ModelReply): _evaluate,
            ("evaluate", ChildResults): _backpropagate,
            ("execute", ChildResults): _on_executed,
        },
    )


# --- expansion -------------------------------------------------------------------


def _expand(run: Run[Options], state: State) -> CallModel:
    """One call proposing the next actions from the selected node."""
    options = run.options
    ask = (
        f"Tree search, simulation {state.simulations + 1} of {options.num_simulations}.\n"
        f"{_describe_path(state.tree, state.expanding)}\n\n"
        f"Propose {options.num_candidates} distinct candidate next actions that continue this path "
        "towards solving the task, best first."
    )
    messages = [*opening(run.spec, run.ctx), {"role": "user", "content": ask}]
    state.phase = "expand"
    return CallModel(
        state=state,
        messages=messages,
        tools=[],
        schema=candidates_schema(options.num_candidates),
        schema_name=CANDIDATES_SCHEMA_NAME,
    )


def _describe_path(tree: search_tree.Tree, node_id: int) -> str:
    """The path's numbered actions under ``Path:``, and what evaluators reflected on them."""
    steps = [tree["nodes"][i] for i in search_tree.path(tree, node_id)[1:]]
    if not steps:
        return "Path:\n(no actions yet)"
    lines = ["Path:", *(f"{n}. {step['action']}" for n, step in enumerate(steps, 1))]
    reflections = [f"- {step['action']}: {step['reflection']}" for step in steps if step.get("reflection")]
    if reflections:
        lines += ["", "Reflections:", *reflections]
    return "\n".join(lines)


# --- simulation ------------------------------------------------------------------


def _evaluate(run: Run[Options], state: State, reply: ModelReply) -> Spawn:
    """One wave of evaluators, one per candidate, each a share of what is left."""
    state.candidates = candidates = reply.parsed["candidates"]
    base = search_tree.path(state.tree, state.expanding)[1:]
    actions = [state.tree["nodes"][i]["action"] for i in base]
    options = run.options
    # With a path to carry out at the end, every wave leaves a share for it.
    share = 1 / (len(candidates) + (1 if options.execute_best else 0))
    children = [
        ChildRequest(
            task=_evaluation_task(run.spec.task, state.simulations + 1, [*actions, candidate]),
            role=EVALUATOR_ROLE,
            instructions="Carry out a path of a tree search, then judge it honestly: a score in 0..1, "
            "a reflection, the answer.",
            strategy=options.evaluator_strategy,
            options={"schema": EVALUATION_SCHEMA, "schema_name": EVALUATION_SCHEMA_NAME},
            fraction=share,
            max_cycles=options.evaluator_max_cycles,
            can_spawn=False,
        )
        for candidate in candidates
    ]
    state.phase = "evaluate"
    return Spawn(state=state, children=children)


def _evaluation_task(task: str, simulation: int, actions: list[str]) -> str:
    """The original task first (its directives steer the sim), then the path to judge."""
    steps = "\n".join(f"{n}. {action}" for n, action in enumerate(actions, 1))
    return (
        f"{task}\n\n"
        f"Tree search simulation {simulation}: evaluate this path of actions towards the task above.\n"
        f"Path:\n{steps}\n\n"
        "Carry the path out, then score how close it comes to solving the task (0 to 1), reflect on "
        "what to do differently, say whether it solves the task, and give the answer it reaches."
    )


def _evaluation(result: AgentResult) -> dict[str, Any]:
    """The evaluator's verdict, or a neutral score with a note when it gave none."""
    status = result.status.value
    if result.status is AgentStatus.COMPLETED and isinstance(result.data, dict):
        data = result.data
        return {
            "score": float(data["score"]),
            "reflection": data["reflection"],
            "solved": bool(data["solved"]),
            "answer": data["answer"],
            "status": status,
            "note": None,
        }
    note = f"not evaluated ({status}: {result.error or 'no verdict'}); scored {NEUTRAL_SCORE}"
    return {"score": NEUTRAL_SCORE, "reflection": "", "solved": False, "answer": "", "status": status, "note": note}


# --- backpropagation and the end -------------------------------------------------


def _backpropagate(run: Run[Options], state: State, outcome: ChildResults) -> Action:
    options, results = run.options, outcome.results
    tree, parent = state.tree, state.expanding
    for candidate, result in zip(state.candidates, results):
        tree, child = search_tree.add_child(tree, parent, candidate, **_evaluation(result))
        tree = search_tree.backpropagate(tree, child, tree["nodes"][child]["score"])
    state.tree, state.candidates = tree, []
    state.simulations += 1
    solving = _solving(tree, options.success_threshold)
    if solving is not None:
        return _carry_out(run, state, solving, solved=True)
    # A wave refused whole for budget ends the search: what is left only shrinks
    # and paths only grow, so no later wave could be funded either.
    unfunded = all(r.status is AgentStatus.BUDGET_EXCEEDED for r in results)
    if unfunded:
        return _finish(state, _best(tree), solved=False)
    selected = None
    if state.simulations < options.num_simulations:
        selected = search_tree.select(tree, options.exploration_weight, state.seed, options.max_tree_depth)
    if selected is None:
        return _carry_out(run, state, _best(tree), solved=False)
    state.expanding = selected
    return _expand(run, state)


def _carry_out(run: Run[Options], state: State, node_id: int | None, solved: bool) -> Action:
    """The best path carried out by one more sub-agent, when ``execute_best`` and some
    candidate was evaluated; else the search's answer at once."""
    tree = state.tree
    if not run.options.execute_best or node_id is None or tree["nodes"][node_id]["note"] is not None:
        return _finish(state, node_id, solved)
    actions = [tree["nodes"][i]["action"] for i in search_tree.path(tree, node_id)[1:]]
    steps = "\n".join(f"{n}. {action}" for n, action in enumerate(actions, 1))
    state.phase, state.best, state.solved = "execute", node_id, solved
    child = ChildRequest(
        task=f"{run.spec.task}\n\nA tree search chose this path of actions towards the task above.\n"
        f"Path:\n{steps}\n\nCarry the path out and answer the task.",
        role=EXECUTOR_ROLE,
        instructions="Carry out the chosen path and answer the task.",
        strategy=run.options.evaluator_strategy,
        options={},
        max_cycles=run.options.evaluator_max_cycles,
        can_spawn=False,
    )
    return Spawn(state=state, children=[child])


def _on_executed(run: Run[Options], state: State, outcome: ChildResults) -> Finish:
    """The executor's answer is the result; without one, the path's evaluated answer."""
    (result,) = outcome.results
    executed = {"agent_id": result.agent_id, "status": result.status.value, "error": result.error}
    return _finish(state, state.best, state.solved, executed=executed, output=result.output if result.ok else None)


def _solving(tree: search_tree.Tree, threshold: float) -> int | None:
    """The first node whose evaluation solved the task with a high enough score."""
    return next((n["id"] for n in tree["nodes"] if n.get("solved") and n["score"] >= threshold), None)


def _best(tree: search_tree.Tree) -> int | None:
    """The best evaluated leaf; a neutral unevaluated one only when nothing was evaluated."""
    evaluated = search_tree.best_leaf(tree, lambda node: node["note"] is None)
    return evaluated if evaluated is not None else search_tree.best_leaf(tree)


def _finish(
    state: State,
    node_id: int | None,
    solved: bool,
    executed: dict[str, Any] | None = None,
    output: str | None = None,
) -> Finish:
    """The best path's answer (``output``, the executor's, over the evaluated one),
    with the search laid out in ``data``.

    The agent completes when any candidate was evaluated. When none was it has no
    answer to give: it ends budget_exceeded if an evaluator was refused for budget,
    else failed.
    """
    tree = state.tree
    steps = [tree["nodes"][i] for i in search_tree.path(tree, node_id)[1:]] if node_id is not None else []
    answer = output if output is not None else (steps[-1]["answer"] if steps else "")
    data: dict[str, Any] = {
        "answer": answer,
        "solved": solved,
        "simulations": state.simulations,
        "path": [step["action"] for step in steps],
        "scores": [step["score"] for step in steps],
        "visits": [step["visits"] for step in steps],
        "notes": [f"{n['action']!r}: {n['note']}" for n in tree["nodes"][1:] if n["note"]],
        "tree": [_summary(n) for n in tree["nodes"]],
        "executed": executed,
    }
    if any(n["note"] is None for n in tree["nodes"][1:]):
        return Finish(state=state, status=AgentStatus.COMPLETED, output=answer, data=data)
    refused = any(n["status"] == AgentStatus.BUDGET_EXCEEDED.value for n in tree["nodes"][1:])
    status = AgentStatus.BUDGET_EXCEEDED if refused else AgentStatus.FAILED
    return Finish(state=state, status=status, error=f"no candidate was evaluated: {data['notes'][0]}", data=data)


def _summary(node: search_tree.Node) -> dict[str, Any]:
    """A node as ``data`` shows it: its place, statistics and verdict, not its prose."""
    keys = ("id", "parent", "depth", "action", "visits", "value", "score", "solved", "note")
    return {key: node.get(key) for key in keys}
