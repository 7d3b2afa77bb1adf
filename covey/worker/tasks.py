"""The Celery tasks: ``covey.run_job``, ``covey.agent``, ``covey.resume`` and ``covey.proceed``.

Each builds the step its message asks for (``covey.worker.step``): how its agent
starts, is joined with its children's results, or is taken up after a pause;
the step reads, runs and commits, and says what became of the delivery in a
``Completion``, which ``_CELERY`` maps to Celery in one table. No task fails for
its agent: every failure becomes an ``AgentResult``. Only a job that cannot run
(an invalid spec) fails its task, with ``InvalidSpec``.

The ledger is the source of truth and messages are hints. A step that must wait
for its children records them, and the resume the last one sends, with its
checkpoint (``covey.store.outbox``), then sends them and ends. Each child's
final record counts it off its parent's join; the last one sends the parent's
resume under the parent's task id, so the root task's result is the job's result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NoReturn

from celery.exceptions import Ignore, Reject
from celery.signals import task_postrun

from covey import wire
from covey.budgets.ledger import AgentTerms, FirstRun
from covey.config import faults
from covey.context import ROOT_AGENT_ID, RunContext
from covey.errors import CoveyError
from covey.models.catalog import UnservableModel
from covey.orchestration.actions import Action
from covey.spec import AgentSpec, InvalidSpec, JobSpec
from covey.status import AgentStatus, CauseKind
from covey.store.catalog import NoWorkerServes
from covey.store.workspace import WorkspaceError
from covey.tools import guardrails
from covey.tools.registry import NotServed, check_served
from covey.worker import attachments, catalog, events, handover, loop, sessions, signing, takeover, tenancy
from covey.worker import step as steps  # resume and proceed take a parameter named step
from covey.worker.agent_state import AgentState
from covey.worker.app import app
from covey.worker.completion import Completion, Kind
from covey.worker.deps import Deps, worker_deps
from covey.worker.messages import agent_payload, proceed_payload, resume_payload
from covey.worker.snapshot import Delivery, Snapshot
from covey.worker.step import OUTAGES, WAITS_FOR_PROCEED, WAITS_FOR_RESUME, Fail

log = logging.getLogger(__name__)


class AgentEnded(CoveyError):
    """A task whose agent ended otherwise than ``completed``: Celery, and so Flower,
    count it a FAILURE, its text the status, the cause and the error. Its result is
    where covey reads it, as before: the agent's node, and a root's result stored
    with its final record (Celery stores nothing of a task that raises this)."""


def _done(task: Any, completion: Completion) -> Any:
    if not completion.stored:
        task.request.ignore_result = True
    value = completion.value
    if isinstance(value, dict) and value.get("status", AgentStatus.COMPLETED) != AgentStatus.COMPLETED:
        # A root whose result Celery stores (links, another result store) returns it: its client reads it there.
        if not (completion.stored and value.get("agent_id") == ROOT_AGENT_ID):
            raise AgentEnded(_ended(value))
    return value


def _ended(value: dict[str, Any]) -> str:
    """``failed (model_error): model call failed: HTTP 500 ...``: how an agent ended."""
    cause = value.get("cause")
    kind = cause.get("kind") if isinstance(cause, dict) else cause
    said = value.get("error") or value.get("output") or ""
    return f"{value['status']}{f' ({kind})' if kind else ''}" + (f": {said}" if said else "")


def _handed_on(task: Any, _: Completion) -> str:
    return handover.handed_on(task.request)


def _drop(task: Any, completion: Completion) -> NoReturn:
    log.log(completion.level, "%s", completion.reason)
    raise Ignore()


def _hand_back(task: Any, completion: Completion) -> NoReturn:
    log.warning("%s", completion.reason)
    raise Reject(completion.reason, requeue=True)


def _refuse(task: Any, completion: Completion) -> NoReturn:
    # A client's mistake, not the worker's: one line, no traceback.
    log.warning("refused job %s: %s", task.request.id, completion.reason)
    raise InvalidSpec(completion.reason)


# What each completion does to its delivery in Celery: the one place the worker meets Celery's control flow.
_CELERY: dict[Kind, Callable[[Any, Completion], Any]] = {
    Kind.DONE: _done,  # the value is the task's result (stored, unless the final record stored it)
    Kind.HANDED_ON: _handed_on,  # no result, no callbacks: the agent's next message carries them
    Kind.DROP: _drop,  # Ignore: acknowledged, nothing stored under its id
    Kind.HAND_BACK: _hand_back,  # Reject(requeue): the broker hands it out again
    Kind.REFUSE: _refuse,  # the task fails with InvalidSpec, stored for its client
}


def _celery(task: Any, completion: Completion) -> Any:
    return _CELERY[completion.kind](task, completion)


def _queue(task: Any) -> str:
    """The job's queue: the one this step's message came from, where every message
    the step sends goes too, so all of a job's agents run on the queue it was sent
    to (a worker reading only ``--queues gpu``, a sweep's queue), not on whatever
    queue the worker's COVEY_QUEUE names. A delivery whose routing key names no
    queue this worker reads (a custom exchange) keeps the worker's default queue."""
    routed = (task.request.delivery_info or {}).get("routing_key")
    return str(routed) if routed in task.app.amqp.queues.consume_from else worker_deps().settings.queue


def _delivery(task: Any, job_id: str, agent_id: str, queue: str | None = None, **job: Any) -> Delivery:
    """The delivery the running task took up (noted for ``takeover.still_held``)."""
    takeover.taking_up(task.request)
    request = task.request
    return Delivery(task.name, request.id, request.kwargs or {}, job_id, agent_id, queue or _queue(task), **job)


def _signed(task: Any, payload: dict[str, Any], sig: Any) -> Completion | None:
    """A drop for a message no covey worker signed for this task's id, before anything
    is read or written for it (not even a result under its task id, which may be
    another job's)."""
    if signing.valid(worker_deps().secret, task.request.id, payload, sig):
        return None
    return Completion.drop(
        f"refused a {task.name} message without a valid signature: {wire.first_words(str(payload), 12)}",
        logging.WARNING,
    )


def _valid_job(deps: Deps, spec: Any, queue: str) -> JobSpec:
    job = JobSpec.parse(spec).with_defaults(deps.settings.model, deps.settings.default_budget())
    try:
        endpoint = deps.llm.catalog.endpoint(job.model)
        catalog.check_tools(deps.redis, deps.settings, job.tools, queue)
    except (UnservableModel, NoWorkerServes) as e:
        raise InvalidSpec(f"invalid job spec: {e}") from e
    if job.budget.max_cost is not None and endpoint.price is None:
        raise InvalidSpec(f"invalid job spec: budget.max_cost: model {job.model!r} has no prices in the models file")
    try:
        check_served(job.tools or [])
    except NotServed as e:
        raise InvalidSpec(f"invalid job spec: tools: {e}") from e
    unguarded = guardrails.missing(job.guardrails)
    if unguarded:
        served = ", ".join(g.name for g in guardrails.served()) or "none"
        raise InvalidSpec(
            f"invalid job spec: guardrails: {unguarded[0]!r} is not served by this worker; served: {served}"
        )
    return job


@app.task(bind=True, name=wire.RUN_JOB, throws=(InvalidSpec, AgentEnded))
def run_job(self, spec: Any, signature: Any = None) -> dict[str, Any] | str:
    """Validate a JobSpec and run its root agent; the task id is the job id.

    Fields the spec leaves unset take this worker's defaults. An invalid spec, one
    naming a model this worker cannot serve, a tool no worker on the job's queue
    serves or a ledger scope never created, or a job for a tenant with a key that
    ``signature`` does not prove, or that its key does not allow (``covey.worker.tenancy``),
    fails the task with ``InvalidSpec`` naming it, and no agent runs. It is logged
    as one warning line: a client's mistake, not the worker's, so no traceback.
    """
    completion = _run_job(self, spec, signature)
    if completion.kind is Kind.REFUSE:
        _forget_root(self.request.id)
    return _celery(self, completion)


def _forget_root(job_id: str) -> None:
    """A refused job runs nowhere: the root message its client recorded is no longer
    expected (a reconciler would send it again, to be refused again)."""
    try:
        worker_deps().outbox.forget_roots([job_id])
    except OUTAGES as e:  # sent again once Redis is back, refused and forgotten then
        log.info("job %s: refused, its recorded message left (Redis unreachable: %s)", job_id, e)


def _run_job(task: Any, spec: Any, signature: Any) -> Completion:
    deps, job_id, queue = worker_deps(), task.request.id, _queue(task)
    digest = wire.digest(spec)  # tells a redelivery from another spec reusing the job id
    try:
        job = tenancy.admitted(deps, _valid_job(deps, spec, queue), job_id, digest, signature)
    except InvalidSpec as e:
        return Completion.refuse(str(e))
    except OUTAGES as e:
        return Completion.hand_back(f"job {job_id}: Redis unreachable ({e}); its run_job handed back to the broker")
    ctx = RunContext(
        job_id=job_id,
        agent_id=ROOT_AGENT_ID,
        budget=job.budget,
        deny=job.deny,
        allow=job.tools,
        scopes=job.scopes(),
        child_fraction=job.child_fraction,
        priority=job.priority,
    )
    # A JobSpec's fields are an AgentSpec's, validated by the same rules: taken as they are.
    agent_spec = AgentSpec.model_construct(**{name: getattr(job, name) for name in AgentSpec.model_fields})
    terms = AgentTerms(
        tools=job.tools,
        deny=job.deny,
        max_cycles=job.max_cycles,
        scopes=job.scopes(),
        digest=digest,
        priority=job.priority,
    )
    opened = events.opened(ROOT_AGENT_ID, None, 0, job.role, job.task)

    def start(_: Snapshot) -> tuple[AgentState, Action] | Completion | Fail:
        run = _first_run(deps, task.request)
        row = deps.ledger.open_root(job_id, ROOT_AGENT_ID, job.budget, terms, run, opened)
        if row is not None and run is not None and row.first_run not in (None, run.delivery):
            if not takeover.unacknowledged(row.first_run):  # its worker died: the message came back as this one
                run = replace(run, replaces=row.first_run)
                row = deps.ledger.open_root(job_id, ROOT_AGENT_ID, job.budget, terms, run, opened)
        if row is None or row.digest != digest:
            return Completion.drop(
                f"refused a task for agent {ROOT_AGENT_ID} of job {job_id}: job {job_id} already runs another "
                "spec: a run_job reusing its id is refused",
                logging.WARNING,
            )
        if run is not None and row.first_run != run.delivery:
            # The broker holds the delivery that runs it: that one ends the step, or is put back itself.
            return Completion.drop(
                f"job {job_id}: another copy of its run_job runs the root's first step: this copy dropped"
            )
        spec = sessions.joined(deps, job_id, agent_spec)
        if isinstance(spec, str):
            return Fail(spec, CauseKind.INVALID_SPEC)
        try:
            attachments.given(deps.workspace(job_id), job.parts)
        except WorkspaceError as e:  # full: files put before the job took the room
            return Fail(f"the task's files: {e}", CauseKind.INVALID_SPEC)
        return loop.begin(deps, ctx, spec, task_id=job_id, row=row)

    delivery = _delivery(task, job_id, ROOT_AGENT_ID, queue, scopes=tuple(job.scopes()), digest=digest)
    return steps.run(task, deps, delivery, start)


def _first_run(deps: Deps, request: Any) -> FirstRun | None:
    """The root's first step for this delivery of the run_job (its tag, which a Redis
    broker keeps when it hands the message back), held as long as a task runs. Not
    on another broker: a message it hands back comes under a new tag, and would
    wait out the dead delivery's hold."""
    tag = (getattr(request, "properties", None) or {}).get("delivery_tag")
    if not tag or not deps.settings.redis_broker:
        return None
    return FirstRun(str(tag), deps.settings.redelivery_seconds)


@app.task(bind=True, name=wire.AGENT, throws=(AgentEnded,))
def agent(
    self, job_id: Any = None, agent_id: Any = None, sig: Any = None, ctx: Any = None, spec: Any = None
) -> dict[str, Any] | str:
    """Run a sub-agent's first step, if a covey worker sent it (``covey.worker.signing``).

    Its message names the agent; what it runs is what its parent opened it with, on
    its ledger row. A message of the previous format (a worker of the release before
    sent it, or recorded it in an outbox) carries the agent's context and spec,
    signed, and runs as that release ran it."""
    if ctx is not None:
        refused = _signed(self, {"ctx": ctx, "spec": spec}, sig)
        if refused is not None or not isinstance(ctx, dict):
            return _celery(self, refused or Completion.drop("refused a covey.agent message: its ctx is no object"))
        job_id, agent_id = ctx.get("job_id"), ctx.get("agent_id")
    else:
        refused = _signed(self, agent_payload(job_id, agent_id), sig)
        if refused is not None:
            return _celery(self, refused)
    deps = worker_deps()

    def start(seen: Snapshot) -> tuple[AgentState, Action] | Completion:
        if ctx is None:
            return loop.begin_opened(deps, str(job_id), str(agent_id), seen.row, task_id=self.request.id)
        context, agent_spec = RunContext.model_validate(ctx), AgentSpec.model_validate(spec)
        return loop.begin(deps, context, agent_spec, task_id=self.request.id, row=seen.row)

    delivery = _delivery(self, str(job_id), str(agent_id))
    return _celery(self, steps.run(self, deps, delivery, start))


@app.task(bind=True, name=wire.RESUME, throws=(AgentEnded,))
def resume(
    self, job_id: str, agent_id: str, spawn_round: int, sig: str | None = None, step: int | None = None
) -> dict[str, Any] | str:
    """Sent by a waiting parent's last child to finish (or, for ``join="each"``, the
    next one, naming the parent's ``step``): reload the parent and go on with its
    children's results, as their own nodes recorded them."""
    refused = _signed(self, resume_payload(job_id, agent_id, spawn_round, step), sig)
    if refused is not None:
        return _celery(self, refused)
    deps, delivery = worker_deps(), _delivery(self, job_id, agent_id)

    def join(seen: Snapshot) -> tuple[AgentState, Action] | Completion | Fail:
        counter, expected = ("spawn_round", spawn_round) if step is None else ("step", step)
        state = steps.checkpointed(seen, delivery, counter, expected, WAITS_FOR_RESUME)
        return loop.join(deps, state) if isinstance(state, AgentState) else state

    return _celery(self, steps.run(self, deps, delivery, join))


@app.task(bind=True, name=wire.PROCEED, throws=(AgentEnded,))
def proceed(self, job_id: str, agent_id: str, step: int, sig: str | None = None) -> dict[str, Any] | str:
    """Go on with an agent whose last task used up its slice (``COVEY_SLICE_SECONDS``),
    or gave its slot back to wait for a scope's running cap or window (``covey.worker.slots``)."""
    refused = _signed(self, proceed_payload(job_id, agent_id, step), sig)
    if refused is not None:
        return _celery(self, refused)
    deps, delivery = worker_deps(), _delivery(self, job_id, agent_id)

    def take_up(seen: Snapshot) -> tuple[AgentState, Action] | Completion | Fail:
        state = steps.checkpointed(seen, delivery, "step", step, WAITS_FOR_PROCEED)
        return loop.proceed(deps, state) if isinstance(state, AgentState) else state

    return _celery(self, steps.run(self, deps, delivery, take_up))


@task_postrun.connect
def _returned(**_: Any) -> None:
    faults.at("after_return")
