"""The Celery tasks: ``covey.run_job``, ``covey.agent`` and ``covey.resume``.

They only wire the loop to Celery. A task that must wait for children checkpoints
its state and replaces itself with ``chord(group(children), resume)``: the chord's
callback inherits the task id, so the root task's result is the job's result.
No task ever raises into a chord: every failure becomes an ``AgentResult``.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import chord, group
from celery.exceptions import Ignore, Retry

from covey.context import RunContext
from covey.orchestration.actions import Action
from covey.results import AgentResult, Status
from covey.spec import AgentSpec, JobSpec
from covey.tree import Node
from covey.worker import loop
from covey.worker.agent_state import AgentState
from covey.worker.app import app
from covey.worker.deps import worker_deps

log = logging.getLogger(__name__)

ROOT_AGENT_ID = "root"


@app.task(bind=True, name="covey.run_job")
def run_job(self, spec: Any) -> dict[str, Any]:
    """Validate a JobSpec and run its root agent; the task id is the job id.

    An invalid spec raises ``InvalidSpec`` naming the field: the task fails and no
    agent runs.
    """
    job = JobSpec.parse(spec)
    deps = worker_deps()
    job_id = self.request.id
    ctx = RunContext(
        job_id=job_id,
        agent_id=ROOT_AGENT_ID,
        budget=job.budget,
        deny=job.deny,
        allow=job.tools,
        scopes=job.scopes(),
        child_fraction=job.child_fraction,
    )
    deps.ledger.open_root(job_id, ROOT_AGENT_ID, job.budget)
    agent_spec = AgentSpec.model_validate(job.model_dump(include=set(AgentSpec.model_fields)))
    return _guarded(self, ctx, lambda: loop.begin(deps, ctx, agent_spec))


@app.task(bind=True, name="covey.agent")
def agent(self, ctx: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    run_ctx = RunContext.model_validate(ctx)
    agent_spec = AgentSpec.model_validate(spec)
    return _guarded(self, run_ctx, lambda: loop.begin(worker_deps(), run_ctx, agent_spec))


@app.task(bind=True, name="covey.resume")
def resume(self, results: list[dict[str, Any]], job_id: str, agent_id: str) -> dict[str, Any]:
    """The chord callback: reload the waiting parent and go on with its children's results."""
    deps = worker_deps()
    state = deps.checkpoints.load(job_id, agent_id)
    if state is None:
        node = deps.tree.node(job_id, agent_id)
        result = AgentResult(
            job_id=job_id, agent_id=agent_id, parent_id=node.parent_id if node else None,
            depth=node.depth if node else 0, status=Status.FAILED, error="checkpoint lost; cannot resume",
        )
        deps.tree.record(job_id, Node.of(result))
        return result.model_dump(mode="json")
    return _guarded(self, state.ctx, lambda: loop.join(state, results))


def _guarded(task, ctx: RunContext, step) -> dict[str, Any]:
    """Run one step; a bug becomes a ``failed`` result instead of a broken chord."""
    try:
        state, action = step()
        return _drive(task, state, action)
    except (Ignore, Retry):
        raise
    except Exception as e:  # noqa: BLE001 - the join must always happen
        log.exception("agent %s of job %s crashed", ctx.agent_id, ctx.job_id)
        result = AgentResult(
            job_id=ctx.job_id, agent_id=ctx.agent_id, parent_id=ctx.parent_id, depth=ctx.depth,
            status=Status.FAILED, error=f"internal error: {type(e).__name__}: {e}",
        )
        worker_deps().tree.record(ctx.job_id, Node.of(result))
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
    return task.replace(chord(header, resume.s(job_id=ctx.job_id, agent_id=ctx.agent_id)))
