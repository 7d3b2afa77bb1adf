"""The Celery tasks: ``covey.run_job``, ``covey.agent`` and ``covey.resume``.

They only wire the loop to Celery. A task that must wait for children checkpoints
its state and replaces itself with ``chord(group(children), resume)``: the chord's
callback inherits the task id, so the root task's result is the job's result.
No task ever raises into a chord: every failure becomes an ``AgentResult``.

A task may be delivered twice (its worker died before the ack). Model calls then
replay from the ledger, a callback of a round the agent has moved past is
ignored, and a step of an agent that already finished hands back its result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import chord, group
from celery import states as celery_states
from celery.exceptions import Ignore, Retry

from covey import labels
from covey.budgets.ledger import AgentTerms
from covey.context import ROOT_AGENT_ID, RunContext
from covey.models.catalog import UnservableModel
from covey.orchestration.actions import Action
from covey.results import AgentResult, Status, Usage
from covey.spec import AgentSpec, InvalidSpec, JobSpec
from covey.store.tree import WAITING, Node
from covey.worker import loop
from covey.worker.agent_state import AgentState
from covey.worker.app import app
from covey.worker.deps import worker_deps

log = logging.getLogger(__name__)

Step = Callable[[], "tuple[AgentState, Action]"]


@app.task(bind=True, name="covey.run_job")
def run_job(self, spec: Any) -> dict[str, Any]:
    """Validate a JobSpec and run its root agent; the task id is the job id.

    Fields the spec leaves unset take this worker's defaults. An invalid spec, or
    one naming a model this worker cannot serve, raises ``InvalidSpec`` naming the
    field: the task fails and no agent runs.
    """
    deps = worker_deps()
    job = JobSpec.parse(spec).with_defaults(deps.settings.model, deps.settings.default_budget())
    try:
        deps.llm.catalog.endpoint(job.model)
    except UnservableModel as e:
        raise InvalidSpec(f"invalid job spec: {e}") from e
    ctx = RunContext(
        job_id=self.request.id,
        agent_id=ROOT_AGENT_ID,
        budget=job.budget,
        deny=job.deny,
        allow=job.tools,
        scopes=job.scopes(),
        child_fraction=job.child_fraction,
    )
    agent_spec = AgentSpec.model_validate(job.model_dump(include=set(AgentSpec.model_fields)))

    def start() -> tuple[AgentState, Action]:
        terms = AgentTerms(tools=job.tools, deny=job.deny, max_cycles=job.max_cycles)
        deps.ledger.open_root(ctx.job_id, ROOT_AGENT_ID, job.budget, terms)
        return loop.begin(deps, ctx, agent_spec, task_id=self.request.id)

    return _guarded(self, ctx.job_id, ROOT_AGENT_ID, start)


@app.task(bind=True, name="covey.agent")
def agent(self, ctx: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    def start() -> tuple[AgentState, Action]:
        return loop.begin(
            worker_deps(), RunContext.model_validate(ctx), AgentSpec.model_validate(spec), task_id=self.request.id
        )

    return _guarded(self, ctx.get("job_id", "?"), ctx.get("agent_id", "?"), start)


@app.task(bind=True, name="covey.resume")
def resume(self, results: list[dict[str, Any]], job_id: str, agent_id: str, spawn_round: int) -> dict[str, Any]:
    """The chord callback: reload the waiting parent and go on with its children's results."""

    def join() -> tuple[AgentState, Action]:
        saved = worker_deps().checkpoints.load(job_id, agent_id)
        if saved is None:
            raise LookupError(f"checkpoint of agent {agent_id} lost; cannot resume round {spawn_round}")
        if saved.round > spawn_round:
            log.info("agent %s of job %s is past round %s: stale callback ignored", agent_id, job_id, spawn_round)
            raise Ignore()
        if saved.round < spawn_round:
            raise LookupError(f"checkpoint of round {spawn_round} lost (round {saved.round} found); cannot resume")
        return loop.join(worker_deps(), AgentState.model_validate_json(saved.state), results)

    return _guarded(self, job_id, agent_id, join)


def _guarded(task, job_id: str, agent_id: str, step: Step) -> dict[str, Any]:
    """Run one step; any error becomes a ``failed`` result instead of a broken chord."""
    state: AgentState | None = None
    try:
        done = _finished_before(task, job_id, agent_id)
        if done is not None:
            return done
        state, action = step()
        return _drive(task, state, action)
    except (Ignore, Retry):
        raise
    except loop.NotOpened as e:
        # Nothing is written into the job: the message was not one of its own.
        log.warning("refused: %s", e)
        return AgentResult(job_id=job_id, agent_id=agent_id, status=Status.FAILED, error=str(e)).model_dump(mode="json")
    except Exception as e:  # noqa: BLE001 - the join must always happen
        log.exception("agent %s of job %s crashed", agent_id, job_id)
        spent = state.usage if state is not None else None
        return _crashed(job_id, agent_id, f"internal error: {type(e).__name__}: {e}", spent)


def _finished_before(task, job_id: str, agent_id: str) -> dict[str, Any] | None:
    """For a redelivered step of an agent that already finished: its result, or
    ``Ignore`` when that result was already stored (its chord already counted it)."""
    node = worker_deps().tree.node(job_id, agent_id)
    if node is None or not node.final:
        return None
    if task.AsyncResult(task.request.id).state == celery_states.SUCCESS:
        log.info("agent %s of job %s already finished: redelivered step ignored", agent_id, job_id)
        raise Ignore()
    return node.result(job_id).model_dump(mode="json")


def _crashed(job_id: str, agent_id: str, error: str, spent: Usage | None) -> dict[str, Any]:
    """Fail the agent, keeping what it spent: the running step's usage, else the
    usage its node last recorded."""
    deps = worker_deps()
    node = deps.tree.node(job_id, agent_id) or Node(agent_id=agent_id)
    result = AgentResult(
        job_id=job_id, agent_id=agent_id, parent_id=node.parent_id, role=node.role, depth=node.depth,
        status=Status.FAILED, error=error, usage=spent or node.usage, started_at=node.started_at,
    )
    deps.tree.record(job_id, Node.of(result, task=node.task, task_id=node.task_id))
    deps.checkpoints.delete(job_id, agent_id)
    deps.ledger.finished(job_id, agent_id)
    return result.model_dump(mode="json")


def _drive(task, state: AgentState, action: Action) -> dict[str, Any]:
    deps = worker_deps()
    outcome = loop.advance(deps, state, action)
    if isinstance(outcome, loop.Finished):
        return outcome.result.model_dump(mode="json")
    ctx = outcome.state.ctx
    if not deps.checkpoints.save(ctx.job_id, ctx.agent_id, outcome.state.spawn_round, outcome.state.model_dump_json()):
        log.info("agent %s of job %s is past round %s: stale step ignored", ctx.agent_id, ctx.job_id,
                 outcome.state.spawn_round)
        raise Ignore()
    deps.tree.record(ctx.job_id, outcome.state.node(WAITING))
    header = group(
        agent.s(ctx=c.model_dump(mode="json"), spec=s.model_dump(mode="json")).set(
            **labels.agent(c.job_id, c.agent_id, s.role, c.depth, s.task)
        )
        for c, s in outcome.children
    )
    spawn_round = outcome.state.spawn_round
    callback = resume.s(job_id=ctx.job_id, agent_id=ctx.agent_id, spawn_round=spawn_round).set(
        **labels.resume(ctx.job_id, ctx.agent_id, spawn_round, len(outcome.children))
    )
    return task.replace(chord(header, callback))
