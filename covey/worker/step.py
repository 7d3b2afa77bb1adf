"""One step of one agent: read, transition, commit; then a ``Completion``.

Every message a worker takes up runs one step of one agent:

1. **Read** what the step needs to decide on its delivery, in one round trip
   (``covey.worker.snapshot``): the agent's node, the message its outbox
   expects next, its checkpoint, its ledger row (an agent's first step), the
   digest of its job's spec (a job's first) and whether the scopes a job names exist.
2. **Admit** (``admit``, a pure function of that snapshot and the delivery): a
   duplicate, a replay, a stale copy or a message for a job that ran another
   spec is dropped before anything is written; a redelivered step of an agent
   that finished answers with its end; a job whose records are gone fails.
3. **Transition**: the agent is started, joined with its children's results or
   taken up after a pause (``Start``), and run through ``covey.worker.loop``
   until it ends, fans out or pauses; its model and tool calls are reserved
   before and recorded after, so a step run again replays them.
4. **Commit**: an end writes the agent's final record (``covey.worker.ending``);
   a fan-out or a pause saves its checkpoint with the messages that go on from
   it in one script (``covey.store.checkpoints``), and only then sends them.

The step returns a ``Completion`` and never raises: Redis or the broker away
hands the message back to run again; records found gone (a wipe) or a
checkpoint this worker cannot read fail the agent with cause ``state_lost``;
anything else is a bug, which fails the agent ``internal`` and is logged whole.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kombu.exceptions import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from covey import keys
from covey.budgets.ledger import no_scope
from covey.config import faults
from covey.config.backend import OneTripRedisBackend
from covey.context import ROOT_AGENT_ID
from covey.errors import StateLost
from covey.orchestration.actions import Action, to_json
from covey.redis_scripts import ScriptCall
from covey.results import AgentResult
from covey.status import AgentStatus, CauseKind
from covey.store import checkpoints, join
from covey.store.outbox import Message
from covey.store.tree import preview
from covey.worker import ending, handover, loop, lost, slots, telemetry, transcript
from covey.worker.agent_state import AgentState, Phase, UnreadableCheckpoint, dump_checkpoint, load_checkpoint
from covey.worker.calls import settle_owed
from covey.worker.completion import HANDED_ON, Completion, taken_over
from covey.worker.deps import Deps
from covey.worker.messages import Route, Sent, agent_message, proceed_message, resume_message
from covey.worker.snapshot import Delivery, Snapshot, first_step

log = logging.getLogger(__name__)

OUTAGES = (RedisConnectionError, RedisTimeoutError, OperationalError)  # Redis or the broker is away
# The phases a resume and a proceed take an agent up from: at any other, the task is stale.
WAITS_FOR_RESUME = frozenset({Phase.AWAITING_CHILDREN})
WAITS_FOR_PROCEED = frozenset({Phase.PAUSED, Phase.AWAITING_SLOT, Phase.AWAITING_APPROVAL})


@dataclass(frozen=True)
class Fail:
    """The agent must end ``failed`` with ``cause``, saying ``reason``."""

    reason: str
    cause: CauseKind = CauseKind.STATE_LOST


Start = Callable[[Snapshot], "tuple[AgentState, Action] | Completion | Fail"]


def admit(delivery: Delivery, seen: Snapshot) -> str | None | Completion | Fail:
    """The expected message this delivery is, as stored (None: a root's first
    step that no outbox records, its run_job sent by a bare Celery client); else
    what becomes of it."""
    job_id, agent_id = delivery.job_id, delivery.agent_id
    if seen.digest is not None and seen.digest != delivery.digest:
        return Completion.drop(
            f"refused a task for agent {agent_id} of job {job_id}: job {job_id} ran another spec: "
            "a run_job reusing its id is refused",
            logging.WARNING,
        )
    if seen.unknown_scope is not None:
        return Completion.refuse(f"invalid job spec: {no_scope(seen.unknown_scope)}")
    if seen.node is not None and seen.node.final:
        if seen.result_stored:
            return Completion.drop(f"agent {agent_id} of job {job_id} already finished: redelivered step ignored")
        return Completion.done(reported(seen.node.result(job_id)))
    stored = seen.expected
    if stored is not None and Message.loads(stored).carried_by(delivery.name, delivery.task_id, delivery.kwargs):
        return stored
    if stored is None and first_step(delivery.name, seen.checkpoint):
        return None
    if stored is None and seen.records_gone:  # the outbox went with them
        return Fail(f"the records of job {job_id} are gone from Redis; cannot take up agent {agent_id}")
    return Completion.drop(f"agent {agent_id} of job {job_id} does not expect this {delivery.name} message: dropped")


def checkpointed(
    seen: Snapshot, delivery: Delivery, counter: str, expected: int, phases: frozenset[Phase]
) -> AgentState | Completion | Fail:
    """The checkpoint a ``resume`` or ``proceed`` takes up: the one whose ``counter``
    (its spawn round, its step) is ``expected``, its agent in one of the ``phases``
    this task takes an agent up from. A later one, or another phase (the agent went
    on), makes the task stale. None, or an earlier one, means the checkpoint this
    task was sent for is lost."""
    job_id, agent_id = delivery.job_id, delivery.agent_id
    what = f"{counter.replace('_', ' ')} {expected}"
    if seen.checkpoint is None and seen.node is not None and seen.node.final:
        # A copy of its last step ran beside it (a woken copy and its counted-down original).
        return Completion.drop(f"agent {agent_id} of job {job_id} finished while this copy of {what} waited: ignored")
    if seen.checkpoint is None:
        return Fail(f"checkpoint of agent {agent_id} lost; cannot resume {what}")
    try:
        state = load_checkpoint(seen.checkpoint.state)
    except UnreadableCheckpoint as e:
        return Fail(str(e))
    found = getattr(state, counter)
    if found > expected or state.phase not in phases:
        return Completion.drop(f"agent {agent_id} of job {job_id} is past {what}: stale task ignored")
    if found < expected:
        return Fail(f"checkpoint of {what} lost ({counter.replace('_', ' ')} {found} found)")
    return state


def run(task: Any, deps: Deps, delivery: Delivery, start: Start) -> Completion:
    """Run one step, if it is the one its agent expects. Never raises: any error
    becomes a ``failed`` end, which counts the agent off its parent's join like any end."""
    job_id, agent_id = delivery.job_id, delivery.agent_id
    state: AgentState | None = None
    try:
        if not deps.still_held():
            return taken_over(job_id, agent_id)
        seen = deps.step_records.snapshot(delivery, lambda task_id: task.backend.get_state(task_id) == "SUCCESS")
        taken = admit(delivery, seen)
        if isinstance(taken, Completion):
            return taken
        if isinstance(taken, Fail):
            return _lost(task, deps, delivery, taken, None)
        with telemetry.step(task, job_id, agent_id):
            started = start(seen)
            if isinstance(started, Completion):
                return started
            if isinstance(started, Fail):
                return _lost(task, deps, delivery, started, None)
            state, action = started
            # This run of the step: a copy of an expected message running beside it is dropped
            # (the reconciler sends the message again if this run dies). A run_job sent by a
            # bare Celery client is no outbox's, and without a Redis broker no reconciler
            # runs: a copy is then the broker's redelivery, and takes over.
            holder = uuid.uuid4().hex if taken is not None and deps.settings.redis_broker else ""
            try:
                return _drive(task, deps, delivery, state, action, taken, holder)
            except OUTAGES:
                raise  # handed back: the rerun step is granted its last call's reservation again
            except BaseException:  # a step that ended any other way: its last call settled
                settle_owed(deps, state)
                raise
            finally:  # a step that broke; _drive gave back the others'
                for woken in slots.give_back(deps, job_id, agent_id, holder):
                    send(task.app, woken)
    except OUTAGES as e:
        return Completion.hand_back(
            f"agent {agent_id} of job {job_id}: {type(e).__module__.split('.')[0]} unreachable ({e}); "
            "step handed back to the broker"
        )
    except (UnreadableCheckpoint, StateLost) as e:
        return _lost(task, deps, delivery, Fail(str(e)), state)
    except Exception as e:
        log.exception("agent %s of job %s crashed", agent_id, job_id)
        entries = transcript.take(deps, state) if state is not None else None
        error = f"internal error: {type(e).__name__}: {e}"
        return _ended(task, job_id, ending.crashed(deps, job_id, agent_id, error, state, CauseKind.INTERNAL, entries))


def _lost(task: Any, deps: Deps, delivery: Delivery, fail: Fail, state: AgentState | None) -> Completion:
    """Its records are gone (a Redis wiped, keys expired), its checkpoint is not this
    worker's to read, or it cannot start (``fail.cause``): the agent fails saying so,
    in one line, keeping what it spent, and nothing it needed is written again; a job
    whose root's records are gone ends there too (``covey.worker.lost``)."""
    job_id, agent_id = delivery.job_id, delivery.agent_id
    log.warning("agent %s of job %s: %s", agent_id, job_id, fail.reason)
    ended = ending.crashed(deps, job_id, agent_id, fail.reason, state, fail.cause)
    if agent_id != ROOT_AGENT_ID:
        lost.end_if_lost(deps, task.backend, job_id, ended.node.error or fail.reason)
    return _ended(task, job_id, ended)


def _ended(task: Any, job_id: str, ended: ending.Ended) -> Completion:
    """An end written outside the loop (a crash, lost records): its parent's resume
    sent, its result what the task returns."""
    send(task.app, ended.resume)
    return Completion.done(reported(ended.node.result(job_id)))


def _drive(
    task: Any, deps: Deps, delivery: Delivery, state: AgentState, action: Action, taken: str | None, holder: str
) -> Completion:
    """Advance the agent; end with its result, or checkpoint it with the messages
    that go on with it (its children and their join, or ``proceed`` after a slice),
    then send them. ``taken`` is the expected message this step took up; ``holder``
    names this run of it, which holds the agent's running slots."""
    outcome = loop.advance(deps, state, action, holder, end=_result_with_record(deps, task, state), taken=taken)
    for woken in slots.give_back(deps, state.ctx.job_id, state.ctx.agent_id, holder):  # before it sends the rest
        send(task.app, woken)
    if isinstance(outcome, Completion):  # a copy of a step that runs, ran, or was taken from this worker
        return outcome
    if isinstance(outcome, loop.Finished):
        faults.at("after_finish")
        send(task.app, outcome.resume)
        if outcome.ended_with:  # its result is stored: Celery need not store it again, nor show it whole
            return Completion.done(receipt(outcome.result), stored=False)
        return Completion.done(reported(outcome.result))
    state, ctx = outcome.state, outcome.state.ctx
    state.step += 1
    carried = handover.carried(task.request) if ctx.depth == 0 else {}  # a sender's links wait for the job's end
    holds_results = any(p.refused is not None for p in state.pending)
    join_kind = join.kind(state.as_completed, holds_results)
    route = Route(delivery.queue, deps.settings.redis_broker)
    then, resume, children, status = None, None, [], AgentStatus.WAITING
    held: list[str] = []
    if isinstance(outcome, loop.Paused):
        state.next_action = to_json(outcome.action)
        countdown = outcome.hop.seconds if outcome.hop else None
        then = proceed_message(deps.secret, task.request.id, ctx, state.step, Sent(route, carried, countdown))
        status = AgentStatus.WAITING if outcome.hop or outcome.approvals else AgentStatus.RUNNING
        held = outcome.approvals
    else:
        step = state.step if state.as_completed else None
        sent = Sent(route, carried)
        resume = resume_message(deps.secret, task.request.id, ctx, state.spawn_round, len(outcome.children), step, sent)
        children = [(c.agent_id, agent_message(deps.secret, c, s, route)) for c, s in outcome.children]
    entries = transcript.take(deps, state)
    saved = deps.checkpoints.save(
        ctx.job_id,
        ctx.agent_id,
        state.step,
        dump_checkpoint(state),
        taken,
        then,
        resume,
        children,
        join_kind,
        entries,
        node=state.node(status),
        awaiting=[p.agent_id for p in state.pending if p.refused is None] if resume else (),
        approvals=held,
    )
    if saved == checkpoints.STALE:
        return Completion.drop(
            f"agent {ctx.agent_id} of job {ctx.job_id} is past step {state.step}: stale task ignored"
        )
    faults.at("after_checkpoint")
    resumed = [resume] if saved == checkpoints.WOKEN else []  # children that finished while it ran
    if held and saved != checkpoints.WOKEN:  # its next step waits for a decision, which sends it
        then = None
    for message in [then] if then else [*(m for _, m in children), *resumed]:
        send(task.app, message)
    faults.at("after_send")
    return HANDED_ON


def _result_with_record(deps: Deps, task: Any, state: AgentState) -> loop.EndCalls | None:
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
        return [backend.storing(request.id, reported(result), request, only_if)]

    return calls


def send(app: Any, message: Message | str | None) -> None:
    """Send a message recorded in the outbox (a ``Message``, or as stored)."""
    if message is None:
        return
    (Message.loads(message) if isinstance(message, str) else message).send(app)


def reported(result: AgentResult) -> dict[str, Any]:
    """The task's return value, kept by the result store for ``COVEY_JOB_TTL``. The
    root's is the job's result. A sub-agent's is read by no one but a person in
    Flower (its parent reads the agent's tree node), so it is a ``receipt``."""
    if result.depth == 0:
        return result.model_dump(mode="json")
    return receipt(result)


def receipt(result: AgentResult) -> dict[str, Any]:
    """What Celery logs and shows in Flower of a task whose result is kept elsewhere
    (a sub-agent's node, a root's result stored with its final record): its status
    and the first words of its answer or error, not the whole result again. Celery
    reprs every return value for its log line and event, in pure Python: a root's
    whole result took about 3% of a sweep's worker time there."""
    detail = {"error": preview(result.error)} if result.error else {"output": preview(result.output or "")}
    if result.cause is not None:
        detail["cause"] = result.cause.kind.value
    return {"status": result.status.value, "job_id": result.job_id, "agent_id": result.agent_id, **detail}
