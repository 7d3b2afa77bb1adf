"""The Celery tasks: ``covey.run_job``, ``covey.agent``, ``covey.resume`` and ``covey.proceed``.

They only wire the loop to Celery. The ledger is the source of truth and messages
are hints: a step that must wait for children records them, and the resume their
last one sends, with its checkpoint (``covey.store.outbox``), then sends the
children and ends. Each child's final record counts it off its parent's join;
the last one sends the parent's resume under the parent's task id, so the root
task's result is the job's result. No task fails for its agent: every failure
becomes an ``AgentResult``.

A message may be delivered twice (its worker died before the ack), replayed or
lost. A step takes up only the message its agent's outbox expects, so any other
is dropped before it writes; model calls replay from the ledger; a step of an
agent that already finished hands back its result; and a lost message is sent
again by the reconciler. A job's first run_job is in no outbox: its root's ledger
row names the delivery running its first step, and another copy waits meanwhile.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from celery import states as celery_states
from celery.exceptions import Ignore, Reject, Retry
from celery.signals import task_postrun
from kombu.exceptions import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from covey import keys, wire
from covey.budgets.ledger import AgentRow, AgentTerms, FirstRun, no_scope
from covey.budgets.redis_ledger import agent_row
from covey.budgets.scopes import GLOBAL
from covey.config import faults
from covey.config.backend import OneTripRedisBackend
from covey.context import ROOT_AGENT_ID, RunContext
from covey.errors import StateLost
from covey.models.catalog import UnservableModel
from covey.orchestration.actions import Action, to_json
from covey.redis_scripts import ScriptCall
from covey.results import AgentResult, Usage
from covey.spec import AgentSpec, InvalidSpec, JobSpec
from covey.status import AgentStatus, Cause, CauseKind
from covey.store import checkpoints
from covey.store.catalog import NoWorkerServes
from covey.store.outbox import Message
from covey.store.transcripts import Entries
from covey.store.tree import Node, preview, unpack
from covey.tools.registry import NotServed, check_served
from covey.worker import (
    catalog,
    handover,
    loop,
    lost,
    signing,
    slots,
    takeover,
    telemetry,
    transcript,
)
from covey.worker.agent_state import AgentState, UnreadableCheckpoint, dump_checkpoint, load_checkpoint
from covey.worker.app import app
from covey.worker.calls import settle_owed
from covey.worker.deps import Deps, worker_deps
from covey.worker.redaction import redact

log = logging.getLogger(__name__)


def _signed_or_ignored(task, payload: dict[str, Any], sig: Any, name: str) -> None:
    """Drop a message no covey worker signed for this task's id, before anything is
    read or written for it (not even a result under its task id, which may be another job's)."""
    if not signing.valid(worker_deps().secret, task.request.id, payload, sig):
        log.warning("refused a %s message without a valid signature: %s", name, wire.first_words(str(payload), 12))
        raise Ignore()


OUTAGES = (RedisConnectionError, RedisTimeoutError, OperationalError)  # Redis or the broker is away

Step = Callable[["_Seen"], "tuple[AgentState, Action]"]


def _queue(task) -> str:
    """The job's queue: the one this step's message came from, where every message
    the step sends goes too, so all of a job's agents run on the queue it was sent
    to (a worker reading only ``--queues gpu``, a sweep's queue), not on whatever
    queue the worker's COVEY_QUEUE names. A delivery whose routing key names no
    queue this worker reads (a custom exchange) keeps the worker's default queue."""
    routed = (task.request.delivery_info or {}).get("routing_key")
    return str(routed) if routed in task.app.amqp.queues.consume_from else worker_deps().settings.queue


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
    return job


@app.task(bind=True, name=wire.RUN_JOB, throws=(InvalidSpec,))
def run_job(self, spec: Any) -> dict[str, Any] | str:
    """Validate a JobSpec and run its root agent; the task id is the job id.

    Fields the spec leaves unset take this worker's defaults. An invalid spec, one
    naming a model this worker cannot serve, a tool no worker on the job's queue
    serves or a ledger scope never created, raises ``InvalidSpec`` naming it: the
    task fails and no agent runs. It is logged as one warning line: a client's
    mistake, not the worker's, so no traceback.
    """
    try:
        return _run_job(self, spec)
    except InvalidSpec as e:
        log.warning("refused job %s: %s", self.request.id, e)
        raise InvalidSpec(str(e)) from None


def _run_job(self, spec: Any) -> dict[str, Any] | str:
    deps = worker_deps()
    try:
        job = _valid_job(deps, spec, _queue(self))
    except OUTAGES as e:
        _hand_back(self.request.id, ROOT_AGENT_ID, e)
    ctx = RunContext(
        job_id=self.request.id,
        agent_id=ROOT_AGENT_ID,
        budget=job.budget,
        deny=job.deny,
        allow=job.tools,
        scopes=job.scopes(),
        child_fraction=job.child_fraction,
    )
    # A JobSpec's fields are an AgentSpec's, validated by the same rules: taken as they are.
    agent_spec = AgentSpec.model_construct(**{name: getattr(job, name) for name in AgentSpec.model_fields})

    digest = wire.digest(spec)  # tells a redelivery from another spec reusing the job id

    def start(_: _Seen) -> tuple[AgentState, Action]:
        terms = AgentTerms(
            tools=job.tools, deny=job.deny, max_cycles=job.max_cycles, scopes=job.scopes(), digest=digest
        )
        run = _first_run(deps, self.request)
        row = deps.ledger.open_root(ctx.job_id, ROOT_AGENT_ID, job.budget, terms, run)
        if row is not None and run is not None and row.first_run not in (None, run.delivery):
            if not takeover.unacknowledged(row.first_run):  # its worker died: the message came back as this one
                run = replace(run, replaces=row.first_run)
                row = deps.ledger.open_root(ctx.job_id, ROOT_AGENT_ID, job.budget, terms, run)
        if row is None or row.digest != digest:
            raise loop.NotOpened(f"job {ctx.job_id} already runs another spec: a run_job reusing its id is refused")
        if run is not None and row.first_run != run.delivery:
            raise _FirstStepHeld(f"job {ctx.job_id}: another copy of its run_job runs the root's first step")
        return loop.begin(deps, ctx, agent_spec, task_id=self.request.id, row=row)

    return _guarded(self, ctx.job_id, ROOT_AGENT_ID, start, scopes=job.scopes(), digest=digest)


class _FirstStepHeld(Exception):
    """Another delivery of the job's run_job runs its root's first step, and the broker
    holds it unacknowledged: this copy is dropped. The step ends with the job past
    its first step; a worker that dies in it has its delivery put back, which takes
    the hold over."""


def _first_run(deps: Deps, request: Any) -> FirstRun | None:
    """The root's first step for this delivery of the run_job (its tag, which a Redis
    broker keeps when it hands the message back), held as long as a task runs. Not
    on another broker: a message it hands back comes under a new tag, and would
    wait out the dead delivery's hold."""
    tag = (getattr(request, "properties", None) or {}).get("delivery_tag")
    if not tag or not deps.settings.redis_broker:
        return None
    return FirstRun(str(tag), deps.settings.redelivery_seconds)


@app.task(bind=True, name=wire.AGENT)
def agent(self, ctx: dict[str, Any], spec: dict[str, Any], sig: str | None = None) -> dict[str, Any] | str:
    """Run one sub-agent, if a covey worker sent it (see ``covey.worker.signing``)."""
    _signed_or_ignored(self, {"ctx": ctx, "spec": spec}, sig, wire.AGENT)

    def start(seen: _Seen) -> tuple[AgentState, Action]:
        deps, context, agent_spec = worker_deps(), RunContext.model_validate(ctx), AgentSpec.model_validate(spec)
        return loop.begin(deps, context, agent_spec, task_id=self.request.id, row=seen.row)

    return _guarded(self, ctx.get("job_id", "?"), ctx.get("agent_id", "?"), start)


@app.task(bind=True, name=wire.RESUME)
def resume(
    self, job_id: str, agent_id: str, spawn_round: int, sig: str | None = None, step: int | None = None
) -> dict[str, Any] | str:
    """Sent by a waiting parent's last child to finish (or, for ``join="each"``, the
    next one, naming the parent's ``step``): reload the parent and go on with its
    children's results, as their own nodes recorded them."""

    _signed_or_ignored(self, _resume_payload(job_id, agent_id, spawn_round, step), sig, wire.RESUME)

    def join(_: _Seen) -> tuple[AgentState, Action]:
        # Past this round (or step): it waits on no children, or a paused step is its next task.
        counter, expected = ("spawn_round", spawn_round) if step is None else ("step", step)
        state = _checkpointed(
            job_id, agent_id, counter, expected, moved_on=lambda s: s.next_action is not None or not s.pending
        )
        return loop.join(worker_deps(), state)

    return _guarded(self, job_id, agent_id, join)


@app.task(bind=True, name=wire.PROCEED)
def proceed(self, job_id: str, agent_id: str, step: int, sig: str | None = None) -> dict[str, Any] | str:
    """Go on with an agent whose last task used up its slice (``COVEY_SLICE_SECONDS``),
    or gave its slot back to wait for a scope's running cap or window (``covey.worker.slots``)."""
    _signed_or_ignored(self, _proceed_payload(job_id, agent_id, step), sig, wire.PROCEED)

    def take_up(_: _Seen) -> tuple[AgentState, Action]:
        # Past this step: the action it paused before was taken.
        state = _checkpointed(job_id, agent_id, "step", step, moved_on=lambda s: s.next_action is None)
        return loop.proceed(worker_deps(), state)

    return _guarded(self, job_id, agent_id, take_up)


def _checkpointed(
    job_id: str, agent_id: str, counter: str, expected: int, moved_on: Callable[[AgentState], bool]
) -> AgentState:
    """The checkpoint a ``resume`` or ``proceed`` task takes up: the one whose
    ``counter`` (its spawn round, its step) is ``expected``. A later one, or one
    ``moved_on`` says is past this task, makes the task stale: ``Ignore``. None, or
    an earlier one, means the checkpoint this task was sent for is lost."""
    what = f"{counter.replace('_', ' ')} {expected}"
    deps = worker_deps()
    saved = deps.checkpoints.load(job_id, agent_id)
    if saved is None and (node := deps.tree.node(job_id, agent_id)) is not None and node.final:
        log.info("agent %s of job %s finished while this copy of %s waited: ignored", agent_id, job_id, what)
        raise Ignore()  # a copy of its last step ran beside it (a woken copy and its counted-down original)
    if saved is None:
        raise StateLost(f"checkpoint of agent {agent_id} lost; cannot resume {what}")
    state = load_checkpoint(saved.state)
    found = getattr(state, counter)
    if found > expected or moved_on(state):
        log.info("agent %s of job %s is past %s: stale task ignored", agent_id, job_id, what)
        raise Ignore()
    if found < expected:
        raise StateLost(f"checkpoint of {what} lost ({counter.replace('_', ' ')} {found} found)")
    return state


def _guarded(
    task, job_id: str, agent_id: str, step: Step, scopes: list[str] | None = None, digest: str | None = None
) -> dict[str, Any] | str:
    """Run one step, if it is the one its agent expects; any error becomes a
    ``failed`` result, which counts the agent off its parent's join like any end.
    A job's first step checks the ledger ``scopes`` it names exist (``InvalidSpec``),
    and that the job its id names, if any, was sent with its spec (``digest``)."""
    state: AgentState | None = None
    try:
        takeover.taking_up(task.request)
        takeover.still_held()
        seen = _seen(task, job_id, agent_id, scopes or [])
        if seen.digest is not None and seen.digest != digest:
            raise loop.NotOpened(f"job {job_id} ran another spec: a run_job reusing its id is refused")
        if seen.unknown_scope is not None:
            raise InvalidSpec(f"invalid job spec: {no_scope(seen.unknown_scope)}")
        done = _finished_before(task, job_id, agent_id, seen.node)
        if done is not None:
            return done
        taken = _taken_up(task, job_id, agent_id, seen)
        with telemetry.step(task, job_id, agent_id):
            state, action = step(seen)
            # This run of the step: a copy of an expected message running beside it is dropped
            # (the reconciler sends the message again if this run dies). A root's first
            # run_job is no outbox's, and without a Redis broker no reconciler runs: a copy
            # is then the broker's redelivery, and takes over.
            holder = uuid.uuid4().hex if taken is not None and worker_deps().settings.redis_broker else ""
            try:
                return _drive(task, state, action, taken, holder)
            except OUTAGES:
                raise  # handed back: the rerun step is granted its last call's reservation again
            except BaseException:  # a step that ended any other way: its last call settled
                settle_owed(worker_deps(), state)
                raise
            finally:  # a step that crashed; _drive gave back the others'
                for woken in slots.give_back(worker_deps(), job_id, agent_id, holder):
                    _send(woken)
    except (Ignore, Reject, Retry, InvalidSpec):
        raise
    except OUTAGES as e:
        _hand_back(job_id, agent_id, e)
    except takeover.TakenOver as e:
        # This process went quiet past its heartbeat: the worker that took the step runs it.
        log.warning("agent %s of job %s: %s; this copy dropped", agent_id, job_id, e)
        raise Ignore() from None
    except (UnreadableCheckpoint, StateLost) as e:
        # Its records are gone (a Redis wiped, keys expired) or its checkpoint is not
        # this worker's to read: the agent fails saying so, in one line, keeping what
        # it spent, and nothing it needed is written again.
        log.warning("agent %s of job %s: %s", agent_id, job_id, e)
        reported = _crashed(job_id, agent_id, str(e), state.usage if state else None, CauseKind.STATE_LOST)
        if agent_id != ROOT_AGENT_ID:
            lost.end_if_lost(worker_deps(), task.backend, job_id, redact(str(e)))
        return reported
    except loop.Unfinished as e:
        log.warning("job %s: %s; dropped", job_id, e)
        raise Ignore() from None
    except slots.RunningElsewhere as e:
        log.info("%s: duplicate dropped", e)
        raise Ignore() from None
    except _FirstStepHeld as e:
        log.info("%s: this copy dropped", e)
        raise Ignore() from None
    except loop.NotOpened as e:
        # Nothing is written, not even a result under this task's id: the message
        # was not one of the job's own, and its task id may be another job's.
        log.warning("refused a task for agent %s of job %s: %s", agent_id, job_id, e)
        raise Ignore() from None
    except Exception as e:
        log.exception("agent %s of job %s crashed", agent_id, job_id)
        spent = state.usage if state is not None else None
        entries = transcript.take(worker_deps(), state) if state is not None else None
        return _crashed(job_id, agent_id, f"internal error: {type(e).__name__}: {e}", spent, entries=entries)


@dataclass(frozen=True)
class _Seen:
    """What a step reads of its agent before it starts, in one round trip."""

    node: Node | None
    expected: str | None  # the message the agent's next step is, as stored
    checkpoint: checkpoints.Checkpoint | None  # read for a run_job only, the one task taken up with none expected
    row: AgentRow | None = None  # read for an agent's first step only (run_job opens the root's first)
    unknown_scope: str | None = None  # of the scopes a run_job names, one never created
    digest: str | None = None  # for a run_job: the spec's its job's root row was opened with, if it was


def _seen(task, job_id: str, agent_id: str, scopes: list[str]) -> _Seen:
    named = [s for s in scopes if s != GLOBAL]  # only created scopes carry counters; global always does
    with worker_deps().redis.pipeline(transaction=False) as pipe:  # one round trip
        pipe.hget(keys.nodes(job_id), agent_id)
        pipe.hget(keys.expected(job_id), agent_id)
        if task.name == wire.RUN_JOB:
            pipe.hmget(keys.checkpoint(job_id, agent_id), "round", "state")
            pipe.hget(keys.agent(job_id, agent_id), "digest")
        if task.name == wire.AGENT:
            pipe.hgetall(keys.agent(job_id, agent_id))
        if named:
            pipe.smismember(keys.scopes_index(), named)
        node, expected, *more = pipe.execute()
    saved, digest = more[:2] if task.name == wire.RUN_JOB else (None, None)
    row = more[0] if task.name == wire.AGENT else None
    created = more[-1] if named else []
    return _Seen(
        node=None if node is None else unpack(agent_id, node),
        expected=None if expected is None else str(expected),
        checkpoint=None if saved is None else checkpoints.Checkpoint.of(*saved),
        row=agent_row(agent_id, row) if row else None,
        unknown_scope=next((s for s, known in zip(named, created) if not known), None),
        digest=digest,
    )


def _taken_up(task, job_id: str, agent_id: str, seen: _Seen) -> str | None:
    """The expected message this delivery is, as stored, or ``Ignore`` (nothing read
    or written) for any other: a duplicate of a step its agent has gone on from, a
    replay, a stale redelivery. A root's first ``run_job`` is expected by none (any
    Celery client sends it) and is taken up until the root saves a checkpoint. A
    job whose records are gone (a wipe) has no outbox either: ``StateLost``."""
    deps, request, stored = worker_deps(), task.request, seen.expected
    if stored is not None and Message.loads(stored).carried_by(task.name, request.id, request.kwargs):
        return stored
    if stored is None and task.name == wire.RUN_JOB and seen.checkpoint is None:
        return None
    if stored is None and deps.ledger.agent(job_id, ROOT_AGENT_ID) is None:  # the outbox went with them
        raise StateLost(f"the records of job {job_id} are gone from Redis; cannot take up agent {agent_id}")
    log.info("agent %s of job %s does not expect this %s message: dropped", agent_id, job_id, task.name)
    raise Ignore()


def _hand_back(job_id: str, agent_id: str, error: Exception) -> NoReturn:
    """Redis (or the broker) stayed away past ``COVEY_REDIS_OUTAGE_SECONDS``: the agent
    is not at fault. Its message goes back to the broker (or, unreachable, stays
    unacknowledged until its visibility timeout) and the step reruns, replaying
    what the ledger settled."""
    log.warning(
        "agent %s of job %s: %s unreachable (%s); step handed back to the broker",
        agent_id,
        job_id,
        type(error).__module__.split(".")[0],
        error,
    )
    raise Reject(str(error), requeue=True) from None


def _finished_before(task, job_id: str, agent_id: str, node: Node | None) -> dict[str, Any] | None:
    """For a redelivered step of an agent that already finished (its ``node``): its
    result, or ``Ignore`` when that result was already stored. A sub-agent's result is
    not stored: its final record already counted it off its parent's join, once."""
    if node is None or not node.final:
        return None
    if task.AsyncResult(task.request.id).state == celery_states.SUCCESS:
        log.info("agent %s of job %s already finished: redelivered step ignored", agent_id, job_id)
        raise Ignore()
    return _reported(node.result(job_id))


def _crashed(
    job_id: str,
    agent_id: str,
    error: str,
    spent: Usage | None,
    cause: CauseKind = CauseKind.INTERNAL,
    entries: Entries | None = None,
) -> dict[str, Any]:
    """Fail the agent, keeping what it spent (the running step's usage, else the
    usage its node last recorded) and its transcript's last ``entries``. When Redis
    cannot be written, its message stays expected in the outbox, and the
    reconciler sends it again."""
    deps = worker_deps()
    error = redact(error)  # an exception's text may quote a key
    node = _failed(Node(agent_id=agent_id), error, spent, cause)
    try:
        known = deps.tree.node(job_id, agent_id)
        if known is not None:
            node = _failed(known, error, spent, cause)
        written, resume = deps.tree.finish(
            job_id,
            node,
            retire=[keys.checkpoint(job_id, agent_id), keys.replies(job_id, agent_id)],
            transcript=entries,
        )
        if not written:  # it had finished: that end stands, and is what this task reports
            node = deps.tree.node(job_id, agent_id) or node
        _send(resume)
    except Exception:
        log.exception("agent %s of job %s: its failure could not be recorded in Redis", agent_id, job_id)
    return _reported(node.result(job_id))


def _failed(node: Node, error: str, spent: Usage | None, cause: CauseKind) -> Node:
    """``node`` ended ``failed``, keeping where it sits, its task and what it spent."""
    return Node(
        agent_id=node.agent_id,
        parent_id=node.parent_id,
        depth=node.depth,
        role=node.role,
        status=AgentStatus.FAILED,
        usage=spent or node.usage,
        error=error,
        cause=Cause(kind=cause),
        task=node.task,
        task_id=node.task_id,
        started_at=node.started_at,
    )


@task_postrun.connect
def _returned(**_: Any) -> None:
    faults.at("after_return")


def _drive(task, state: AgentState, action: Action, taken: str | None, holder: str) -> dict[str, Any] | str:
    """Advance the agent; end with its result, or checkpoint it with the messages
    that go on with it (its children and their join, or ``proceed`` after a slice),
    then send them. ``taken`` is the expected message this step took up; ``holder``
    names this run of it, which holds the agent's running slots."""
    deps = worker_deps()
    outcome = loop.advance(deps, state, action, holder, end=_result_with_record(deps, task, state), taken=taken)
    for woken in slots.give_back(deps, state.ctx.job_id, state.ctx.agent_id, holder):  # before it sends the rest
        _send(woken)
    if isinstance(outcome, loop.Finished):
        faults.at("after_finish")
        _send(outcome.resume)
        if outcome.ended_with:  # its result is stored: Celery need not store it again, nor show it whole
            task.request.ignore_result = True
            return _receipt(outcome.result)
        return _reported(outcome.result)
    state, ctx, request, queue = outcome.state, outcome.state.ctx, task.request, _queue(task)
    state.step += 1
    carried = handover.carried(request) if ctx.depth == 0 else {}  # a sender's links wait for the job's end
    then, resume, children, join, status = None, None, [], _join(state), AgentStatus.WAITING
    if isinstance(outcome, loop.Paused):
        state.next_action = to_json(outcome.action)
        countdown = outcome.hop.seconds if outcome.hop else None
        then = _proceed_message(deps.secret, request.id, ctx, state.step, queue, carried, countdown)
        status = AgentStatus.WAITING if outcome.hop else AgentStatus.RUNNING
    else:
        step = state.step if state.as_completed else None
        resume = _resume_message(
            deps.secret, request.id, ctx, state.spawn_round, len(outcome.children), queue, carried, step
        )
        children = [(c.agent_id, _agent_message(deps.secret, c, s, queue)) for c, s in outcome.children]
    entries = transcript.take(deps, state)
    saved = deps.checkpoints.save(
        ctx.job_id, ctx.agent_id, state.step, dump_checkpoint(state), taken, then, resume, children, join, entries
    )
    if saved == checkpoints.STALE:
        log.info("agent %s of job %s is past step %s: stale task ignored", ctx.agent_id, ctx.job_id, state.step)
        raise Ignore()
    faults.at("after_checkpoint")
    deps.tree.record(ctx.job_id, state.node(status))
    resumed = [resume] if saved == checkpoints.WOKEN else []  # children that finished while it ran
    for message in [then] if then else [*(m for _, m in children), *resumed]:
        _send(message)
    faults.at("after_send")
    return handover.handed_on(request)


def _result_with_record(deps: Deps, task, state: AgentState) -> loop.EndCalls | None:
    """For a root: its result stored in its final record's round trip (one round trip
    less per job), and only if that record is the end written. Not where the result
    store is another Redis, nor for a task that links callbacks or a chain (Celery
    sends them before it stores the result, which lists them) or is part of a chord."""
    request, backend = task.request, task.backend
    links = request.callbacks or request.errbacks or request.chain or request.chord
    if state.ctx.depth > 0 or links or deps.settings.backend != deps.settings.redis_url:
        return None
    if not isinstance(backend, OneTripRedisBackend) or not backend.one_trip:
        return None

    def calls(record: str, result: AgentResult) -> list[ScriptCall]:
        only_if = (keys.nodes(result.job_id), result.agent_id, record)
        return [backend.storing(request.id, _reported(result), request, only_if)]

    return calls


def _join(state: AgentState) -> checkpoints.Join:
    """How the checkpoint joins the agent's children: all at once, as each finishes,
    or at once (it holds refused children's results already)."""
    if not state.as_completed:
        return "all"
    return "now" if any(p.refused is not None for p in state.pending) else "each"


def _send(message: Message | str | None) -> None:
    """Send a message recorded in the outbox (a ``Message``, or as stored)."""
    if message is None:
        return
    (Message.loads(message) if isinstance(message, str) else message).send(app)


def _reported(result: AgentResult) -> dict[str, Any]:
    """The task's return value, kept by the result store for ``COVEY_JOB_TTL``. The
    root's is the job's result. A sub-agent's is read by no one but a person in
    Flower (its parent reads the agent's tree node), so it is a ``_receipt``."""
    if result.depth == 0:
        return result.model_dump(mode="json")
    return _receipt(result)


def _receipt(result: AgentResult) -> dict[str, Any]:
    """What Celery logs and shows in Flower of a task whose result is kept elsewhere
    (a sub-agent's node, a root's result stored with its final record): its status
    and the first words of its answer or error, not the whole result again. Celery
    reprs every return value for its log line and event, in pure Python: a root's
    whole result took about 3% of a sweep's worker time there."""
    detail = {"error": preview(result.error)} if result.error else {"output": preview(result.output or "")}
    return {"status": result.status.value, "job_id": result.job_id, "agent_id": result.agent_id, **detail}


def _agent_message(secret: bytes, ctx: RunContext, spec: AgentSpec, queue: str) -> Message:
    """A child's ``covey.agent`` message: its context and spec, signed for its own
    task id, labelled for Flower. The id is the child's, whoever makes the message,
    so a re-sent one is the same message.

    Its result is not kept under its task id: the parent reads the child's tree
    node, and a kept result would cost Redis most of a kilobyte per agent for
    ``COVEY_JOB_TTL``."""
    payload = {"ctx": ctx.model_dump(mode="json"), "spec": spec.model_dump(mode="json")}
    task_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"covey:{ctx.job_id}/{ctx.agent_id}"))
    options = {
        "ignore_result": True,
        "queue": queue,
        **wire.agent(ctx.job_id, ctx.agent_id, spec.role, ctx.depth, spec.task),
        **telemetry.headers(ctx),
    }
    return Message(wire.AGENT, task_id, {**payload, "sig": signing.sign(secret, task_id, payload)}, options)


def _resume_message(
    secret: bytes,
    task_id: str,
    ctx: RunContext,
    spawn_round: int,
    children: int,
    queue: str,
    carried: dict[str, Any],
    step: int | None = None,
) -> Message:
    """The resume of a waiting agent, under its own task id: the root's stores the job's
    result. One of a ``join="each"`` names the step it resumes (``step``): such an agent
    waits many times in one round."""
    payload = _resume_payload(ctx.job_id, ctx.agent_id, spawn_round, step)
    options = {
        "ignore_result": ctx.depth > 0,
        "queue": queue,
        **wire.resume(ctx.job_id, ctx.agent_id, spawn_round, children, step),
        **telemetry.headers(ctx),
    }
    return Message(
        wire.RESUME, task_id, {**payload, "sig": signing.sign(secret, task_id, payload)}, {**options, **carried}
    )


def _proceed_message(
    secret: bytes,
    task_id: str,
    ctx: RunContext,
    step: int,
    queue: str,
    carried: dict[str, Any],
    countdown: float | None = None,
) -> Message:
    """The task that takes a paused agent up again, under its own task id; a waiting
    agent's is sent ``countdown`` seconds ahead (a re-send waits it out again)."""
    kwargs = {"job_id": ctx.job_id, "agent_id": ctx.agent_id, "step": step}
    sig = signing.sign(secret, task_id, _proceed_payload(ctx.job_id, ctx.agent_id, step))
    options: dict[str, Any] = {
        "ignore_result": ctx.depth > 0,
        "queue": queue,
        **wire.proceed(ctx.job_id, ctx.agent_id, step),
        **telemetry.headers(ctx),
    }
    if countdown:
        options["countdown"] = round(countdown, 3)
    return Message(wire.PROCEED, task_id, {**kwargs, "sig": sig}, {**options, **carried})


def _resume_payload(job_id: str, agent_id: str, spawn_round: int, step: int | None = None) -> dict[str, Any]:
    payload = {"job_id": job_id, "agent_id": agent_id, "spawn_round": spawn_round}
    return payload if step is None else {**payload, "step": step}


def _proceed_payload(job_id: str, agent_id: str, step: int) -> dict[str, Any]:
    return {"job_id": job_id, "agent_id": agent_id, "step": step, "task": "proceed"}
