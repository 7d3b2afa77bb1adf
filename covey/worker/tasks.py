"""The Celery tasks: ``covey.run_job``, ``covey.agent`` and ``covey.resume``.

They only wire the loop to Celery. A task that must wait for children checkpoints
its state and replaces itself with ``chord(group(children), resume)``: the chord's
callback inherits the task id, so the root task's result is the job's result.
No task ever raises into a chord: every failure becomes an ``AgentResult``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import chord, group
from celery.exceptions import Ignore, Retry

from covey.context import ROOT_AGENT_ID, RunContext
from covey.orchestration.actions import Action
from covey.results import AgentResult, Status
from covey.spec import AgentSpec, JobSpec
from covey.store.tree import Node
from covey.worker import loop
from covey.worker.agent_state import AgentState
from covey.worker.app import app
from covey.worker.deps import worker_deps

log = logging.getLogger(__name__)

Step = Callable[[], "tuple[AgentState, Action]"]


@app.task(bind=True, name="covey.run_job")
def run_job(self, spec: Any) -> dict[str, Any]:
    """Validate a JobSpec and run its root agent; the task id is the job id.

    Fields the spec leaves unset take this worker's defaults. An invalid spec
    raises ``InvalidSpec`` naming the field: the task fails and no agent runs.
    """
    deps = worker_deps()
    job = JobSpec.parse(spec).with_defaults(deps.settings.model, deps.settings.default_budget())
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
        deps.ledger.open_root(ctx.job_id, ROOT_AGENT_ID, job.budget)
        return loop.begin(deps, ctx, agent_spec)

    return _guarded(self, ctx.job_id, ROOT_AGENT_ID, start)


@app.task(bind=True, name="covey.agent")
def agent(self, ctx: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    def start() -> tuple[AgentState, Action]:
        return loop.begin(worker_deps(), RunContext.model_validate(ctx), AgentSpec.model_validate(spec))

    return _guarded(self, ctx.get("job_id", "?"), ctx.get("agent_id", "?"), start)


@app.task(bind=True, name="covey.resume")
def resume(self, results: list[dict[str, Any]], job_id: str, agent_id: str, spawn_round: int) -> dict[str, Any]:
    """The chord callback: reload the waiting parent and go on with its children's results."""

    def join() -> tuple[AgentState, Action]:
        state = worker_deps().checkpoints.load(job_id, agent_id, spawn_round)
        if state is None:
            raise LookupError(f"checkpoint of round {spawn_round} lost; cannot resume")
        return loop.join(worker_deps(), state, results)

    return _guarded(self, job_id, agent_id, join)


def _guarded(task, job_id: str, agent_id: str, step: Step) -> dict[str, Any]:
    """Run one step; any error becomes a ``failed`` result instead of a broken chord."""
    try:
        state, action = step()
        return _drive(task, state, action)
    except (Ignore, Retry):
        raise
    except Exception as e:  # noqa: BLE001 - the join must always happen
        log.exception("agent %s of job %s crashed", agent_id, job_id)
        return _crashed(job_id, agent_id, f"internal error: {type(e).__name__}: {e}")


def _crashed(job_id: str, agent_id: str, error: str) -> dict[str, Any]:
    tree = worker_deps().tree
    node = tree.node(job_id, agent_id) or Node(agent_id=agent_id)
    result = AgentResult(
        job_id=job_id, agent_id=agent_id, parent_id=node.parent_id, role=node.role, depth=node.depth,
        status=Status.FAILED, error=error, usage=node.usage,
    )
    tree.record(job_id, Node.of(result))
    return result.model_dump(mode="json")


def _drive(task, state: AgentState, action: Action) -> dict[str, Any]:
    deps = worker_deps()
    outcome = loop.advance(deps, state, action)
    if isinstance(outcome, loop.Finished):
        return outcome.result.model_dump(mode="json")
    deps.checkpoints.save(outcome.state)
    ctx = outcome.state.ctx
    header = group(
        agent.s(ctx=c.model_dump(mode="json"), spec=s.model_dump(mode="json")) for c, s in outcome.children
    )
    callback = resume.s(job_id=ctx.job_id, agent_id=ctx.agent_id, spawn_round=outcome.state.spawn_round)
    return task.replace(chord(header, callback))
