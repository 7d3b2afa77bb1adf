"""One model call of an agent: reserve, call (or replay), settle, and check the reply.

The reservation holds the worst case (the prompt's bound, ``covey.worker.reservation``,
plus the call's ``max_call_tokens``, shrunk to what is left down to a useful reply;
in money too, where the model has prices) on the agent, its ancestors and every
global scope, and the call may spend no more than it was granted: a provider
reporting more prompt or completion tokens than were reserved for them is charged
in full and stops the agent. A reply is handed to the strategy only when it is whole: one cut at its
token cap, withheld by a content filter, or calling a tool when none was offered,
ends the agent with a status that says so, never ``completed`` with a fragment; one
calling a tool it was not offered among others goes to the strategy, which tells
the model the names it may use (``ModelReply.offered``), as a tool's error.
One that misses the JSON schema it was asked for is asked again with the
validation error, up to the spec's ``max_schema_retries`` (each ask a call of its
own, reserved and settled), before the agent fails. A scope whose per-minute
window is full makes the agent give its worker slot back and ask again when the
next minute opens (``covey.worker.slots``), unless that passes its deadline.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from covey.budgets.ledger import Grant
from covey.models.chat import ModelError
from covey.models.replies import ModelReply
from covey.models.structured import SchemaMismatch, parse
from covey.orchestration.actions import CallModel
from covey.results import Usage
from covey.status import AgentStatus, Cause, CauseKind, Resource
from covey.store import model_cache
from covey.tools.builtin import SPAWN_TOOLS
from covey.tools.registry import narrow, offered, schemas
from covey.worker import budget_notice, deltas, events, interrupt, slots, telemetry, transcript, wrap_up
from covey.worker.agent_state import AgentState
from covey.worker.completion import Completion, taken_over
from covey.worker.deps import Deps
from covey.worker.redaction import redact
from covey.worker.replay import CallRecord
from covey.worker.reservation import Reservation, reservation
from covey.worker.slots import Hop
from covey.worker.wrap_up import WrappedUp

log = logging.getLogger(__name__)

# A grant below this many completion tokens (or the agent's own call cap, when
# that is smaller) buys no useful reply: the agent ends budget_exceeded instead.
MIN_REPLY_TOKENS = 64
SPEND_RECORD_SECONDS = 1.0
MAX_CALL_TOKENS_HINT = "raise it with covey run --max-call-tokens N, or max_call_tokens in the spec"


@dataclass(frozen=True)
class Stop:
    """Why the agent ends at this call: the cause, and the sentence for a person."""

    cause: Cause
    reason: str

    @classmethod
    def of(cls, kind: CauseKind, reason: str) -> Stop:
        return cls(Cause(kind=kind), reason)

    @property
    def status(self) -> AgentStatus:
        return self.cause.kind.status


def call_model(
    deps: Deps, state: AgentState, action: CallModel, seconds_left: float | None
) -> ModelReply | Stop | Hop | WrappedUp | Completion:
    """The model's reply to ``action``; or, when the budget stops the agent at it, its
    wrap-up's (``covey.worker.wrap_up``), unless that finds no room either; a dropping
    ``Completion`` when another worker took the step before the call was sent."""
    began = deps.now()
    outcome = _call_model(deps, state, action, seconds_left)
    if not isinstance(outcome, Stop) or not wrap_up.due(state.spec, outcome.cause):
        return outcome
    seconds_left = _still_left(deps, began, seconds_left)
    if seconds_left is not None and seconds_left <= 0:
        return outcome
    ctx = state.ctx
    log.info("job %s agent %s wraps up: %s", ctx.job_id, ctx.agent_id, outcome.reason)
    last = _call_model(deps, state, wrap_up.last_call(action), seconds_left, wrapping=True)
    if isinstance(last, ModelReply):
        return WrappedUp(last, outcome.reason, outcome.cause)
    if isinstance(last, Hop | Completion):  # held up by calls in flight (asked again after the wait), or taken
        return last
    return replace(outcome, reason=f"{outcome.reason}; its wrap-up call ended too: {last.reason}")


def _call_model(
    deps: Deps,
    state: AgentState,
    action: CallModel,
    seconds_left: float | None,
    asked_again: int = 0,
    unanswered: Stop | None = None,
    wrapping: bool = False,
) -> ModelReply | Stop | Hop | Completion:
    """``asked_again``: off-schema replies so far; ``unanswered``: the end of the
    last attempt, when this one asks again after it went unanswered; ``wrapping``:
    the agent's wrap-up call, which spends what the ones before it kept."""
    settle_owed(deps, state)  # a call asked again reserves after the one before it settled
    ctx, spec = state.ctx, state.spec
    began = deps.now()
    names = narrow(offered(ctx.allow, ctx.deny), action.tools)
    agents_left = _agents_left(state) if SPAWN_TOOLS & set(names) else None
    if ctx.budget.max_depth < 1 or agents_left == 0:  # no spawn could succeed: none is offered
        names = [name for name in names if name not in SPAWN_TOOLS]
    tools = schemas(names, agents_left)
    if action.functions:  # the strategy's own tools (an SDK or pydantic-ai agent's), offered beside covey's
        tools = [*tools, *action.functions]
        names = [*names, *(f["function"]["name"] for f in action.functions)]
    if spec.budget_notice and not wrapping:  # before the reservation, which bounds the prompt it is part of
        budget_notice.told(action.messages, budget_notice.note(deps, state, seconds_left))
    held = reservation(deps, state, action, tools)
    if wrapping:  # sent without tools, bounded as if they were sent where that is tighter
        held = replace(held, prompt=wrap_up.bound(action, held.prompt))
        names, tools = [], []
    estimate = held.prompt
    state.cycle += 1
    rid = f"{ctx.agent_id}:{state.cycle}"
    floor = min(MIN_REPLY_TOKENS, spec.max_call_tokens)
    grant = deps.ledger.reserve(
        ctx.job_id,
        ctx.chain,
        ctx.scopes,
        rid,
        tokens=estimate + spec.max_call_tokens,
        min_tokens=estimate + floor,
        cycle=state.cycle,
        pricing=held.pricing,
        event=events.model_started(state, rid),
        keep=0 if wrapping or not names else wrap_up.keep(spec, action, estimate),
    )
    if grant.retry_after is not None:
        state.cycle -= 1  # nothing was reserved: the call is asked for again under the same id
        if seconds_left is not None and grant.retry_after >= seconds_left:
            return Stop.of(CauseKind.DEADLINE, f"{grant.reason}: {_what_opens(grant)} after the deadline")
        log.info("job %s agent %s waits %.1fs: %s", ctx.job_id, ctx.agent_id, grant.retry_after, grant.reason)
        telemetry.waited(grant.retry_after, grant.reason or "")
        return _wait(deps, grant)
    if not grant.ok:
        assert grant.cause is not None and grant.reason is not None  # a refusal always says why
        telemetry.refused(grant.cause, grant.reason)
        if unanswered is not None:
            return replace(unanswered, reason=f"{unanswered.reason}; not asked again: {grant.reason}")
        return Stop(grant.cause, grant.reason)
    max_tokens = max(1, grant.tokens - estimate)
    if grant.record is None and not deps.still_held():
        # Stopped past its heartbeat since the step's own check (a paused process): the
        # worker that took the step makes this call, under this reservation; not both.
        return taken_over(ctx.job_id, ctx.agent_id)
    with telemetry.model_call(state, rid, grant.record is not None, action.messages) as seen:
        if grant.record is not None:  # settled before this step was redelivered: replay it
            record = seen(CallRecord.model_validate_json(grant.record))
            if action.key is not None and record.key != action.key:
                state.usage += record.usage or Usage(cycles=1)
                return _another_path(rid)
        else:
            record = seen(_call(deps, state, rid, action, tools, held, max_tokens, seconds_left))
    transcript.model_call(deps, state, action, names, record, max_tokens)
    if record.error is not None:
        state.usage += record.usage or Usage(cycles=1)
        # A record settled by a worker that kept no cause (an older version) is a model error.
        stop = Stop(record.cause or Cause(kind=CauseKind.MODEL_ERROR), record.error)
        return _asked_again(deps, state, action, began, seconds_left, asked_again, stop, record, unanswered, wrapping)
    if record.usage is None:  # never: a reply is settled with its usage
        raise ValueError(f"call {rid} was settled without its usage")
    state.usage += record.usage
    # The next call's bound starts from this one's count only where the model asked counted
    # it: not a fallback's count, nor a cached reply's (none: the model was not called).
    counted = record.answered_by is None and not record.cached
    state.prompt_mark = held.reported(record.usage) if counted else None
    _show_spend(deps, state)
    over = _over_reserved(record.usage, estimate, max_tokens)
    if over is not None:
        return over
    reply = _checked(record.model_reply(), names, max_tokens, spec.max_call_tokens, grant.bound)
    if isinstance(reply, Stop) or action.schema is None or reply.tool_calls:  # a reply that acts answers later
        return reply
    try:
        return replace(reply, parsed=parse(reply.content, action.schema))
    except SchemaMismatch as e:
        if asked_again >= spec.max_schema_retries:
            return Stop.of(CauseKind.MALFORMED_REPLY, str(e))
        log.info("job %s agent %s: asked again after an off-schema reply: %s", ctx.job_id, ctx.agent_id, e)
        left = _still_left(deps, began, seconds_left)
        seconds_left = None if left is None else max(0.001, left)
        return _call_model(deps, state, _ask_again(action, reply, e), seconds_left, asked_again + 1, wrapping=wrapping)


def _asked_again(
    deps: Deps,
    state: AgentState,
    action: CallModel,
    began: datetime,
    seconds_left: float | None,
    asked_again: int,
    stop: Stop,
    record: CallRecord,
    before: Stop | None,
    wrapping: bool,
) -> ModelReply | Stop | Hop | Completion:
    """A call that went unanswered (charged its reservation) is asked again as a new
    call, reserved anew, while the model's retries and the deadline allow: the
    budget counts every attempt a provider may bill."""
    if not record.unanswered:
        return stop
    taken = 0 if before is None else before.cause.retries or 0  # asked again so far
    stop = replace(stop, cause=stop.cause.model_copy(update={"retries": taken or None}))
    left = _still_left(deps, began, seconds_left)
    if taken >= deps.settings.model_retries or (left is not None and left <= 0):
        return stop
    ctx = state.ctx
    log.info("job %s agent %s: asked again after an unanswered call: %s", ctx.job_id, ctx.agent_id, stop.reason)
    again = replace(stop, cause=stop.cause.model_copy(update={"retries": taken + 1}))
    return _call_model(deps, state, action, left, asked_again, again, wrapping)


def _another_path(rid: str) -> Stop:
    """A step run again asked call ``rid`` for another request than the one its record
    answers: replaying that reply would answer a question not asked, and calling
    again would charge twice, so the agent ends."""
    return Stop(
        Cause(kind=CauseKind.NONDETERMINISTIC, call=rid),
        f"model call {rid} was replayed for another request than the one it recorded: "
        "the agent took another path on replay (its code, or what it read, changed)",
    )


def _still_left(deps: Deps, began: datetime, seconds_left: float | None) -> float | None:
    """Of ``seconds_left`` at ``began``, what is left now (None: no deadline; may be 0 or less)."""
    return None if seconds_left is None else seconds_left - (deps.now() - began).total_seconds()


def _ask_again(action: CallModel, reply: ModelReply, error: SchemaMismatch) -> CallModel:
    """The call again, shown its off-schema reply and what is wrong with it."""
    retry = (
        f"Your reply does not match the JSON schema asked for ({error}). "
        "Answer again with JSON that matches the schema exactly, and nothing else."
    )
    messages = [
        *action.messages,
        {"role": "assistant", "content": reply.content or ""},
        {"role": "user", "content": retry},
    ]
    return replace(action, messages=messages)


def _wait(deps: Deps, grant: Grant) -> Hop:
    """The agent gives its worker slot back until the scope's next window opens, or
    until the calls in flight that hold what it needs may have settled."""
    cause = grant.cause
    assert cause is not None and cause.resource is not None and grant.retry_after is not None
    what = cause.resource.value.replace("_", " ")
    if cause.kind is CauseKind.RATE_LIMITED:
        return slots.hop(deps, f"the per-minute window of scope {cause.scope} ({what})", grant.retry_after)
    row = f"scope {cause.scope}" if cause.scope else f"agent {cause.agent_id}"
    return slots.hop(deps, f"calls in flight holding the {what} of {row}", grant.retry_after)


def _what_opens(grant: Grant) -> str:
    held_up = grant.cause is not None and grant.cause.kind is CauseKind.BUDGET
    return "the calls in flight may not settle" if held_up else "the next minute's window opens"


def _agents_left(state: AgentState) -> int | None:
    """Sub-agents this agent may still open, for its spawn tools' description: its own
    cap (clamped to its ancestors' when it was opened) less what its subtree has
    started. Siblings may have used an ancestor's share since; the ledger refuses
    what no longer fits when the child is opened, so no read is spent on it here."""
    cap = state.ctx.budget.max_agents
    return None if cap is None else max(0, cap - state.usage.agents)


def _show_spend(deps: Deps, state: AgentState) -> None:
    """Readers see a running agent's spend as it settles, and its transcript so far:
    written at most once per ``SPEND_RECORD_SECONDS``, since an agent's end writes
    its node (and the rest of its transcript) anyway."""
    now = deps.now()
    if state.recorded_at is None or (now - state.recorded_at).total_seconds() >= SPEND_RECORD_SECONDS:
        settle_owed(deps, state)  # the spend shown is what the ledger holds
        deps.tree.record(state.ctx.job_id, state.node(AgentStatus.RUNNING), transcript=transcript.take(deps, state))
        state.recorded_at = now


def _call(
    deps: Deps,
    state: AgentState,
    rid: str,
    action: CallModel,
    tools: list[dict[str, Any]],
    held: Reservation,
    max_tokens: int,
    seconds_left: float | None,
) -> CallRecord:
    """Call the model and settle what it cost, keeping the outcome for a replay.

    Anything but a ``ModelError`` (a bug, a dying worker) leaves the reservation
    live: a rerun of the step is granted it again and settles what it spends, and
    a step never rerun has its hold released when the reservation expires."""
    at, started = deps.now(), time.perf_counter()
    kept = _cache_key(deps, state, action, tools) if state.spec.cache else None
    cached = deps.cache.get(kept, max_tokens) if kept is not None else None
    if cached is not None:  # the model is not called: nothing is charged but the cycle
        record = CallRecord(
            reply=cached.reply, usage=Usage(cycles=1), at=at, latency_ms=0.0, cached=True, key=action.key
        )
        _settle(deps, state, rid, Usage(cycles=1), record)
        return record
    try:
        with deltas.published(deps, state, rid) as on_text:
            reply, usage = interrupt.awaited(
                deps,
                state,
                lambda: deps.llm.call(
                    state.spec.model,
                    action.messages,
                    tools,
                    max_tokens,
                    timeout=seconds_left,
                    schema=action.schema,
                    schema_name=action.schema_name,
                    params=state.spec.model_params,
                    prompt_reserved=held.prompt,
                    on_text=on_text,
                ),
                Usage(prompt_tokens=held.prompt, completion_tokens=max_tokens, cycles=1),
            )
    except ModelError as e:  # charged what an answer that cannot be used cost (e.usage), else nothing
        spent = held.costed(e.usage) if e.usage else None
        latency = transcript.elapsed_ms(started)
        # Kept for a replay: the error.
        record = CallRecord(
            error=redact(str(e)),
            cause=e.cause,
            usage=spent,
            at=at,
            latency_ms=latency,
            unanswered=e.unanswered,
            key=action.key,
        )
        _settle(deps, state, rid, spent or Usage(), record)
        return record
    usage = held.costed(usage, reply.model)
    record = CallRecord.of_reply(reply, usage, at, transcript.elapsed_ms(started))
    record.key = action.key
    _settle(deps, state, rid, usage, record)
    if kept is not None and record.reply is not None:
        deps.cache.put(kept, record.reply, usage)
    return record


def _cache_key(deps: Deps, state: AgentState, action: CallModel, tools: list[dict[str, Any]]) -> str:
    """The request's key in the reply cache: its endpoint, provider model and parameters
    with the spec's reply cap (not this call's grant, which moves with the budget)."""
    model, spec = state.spec.model, state.spec
    params = deps.llm.parameters(model, spec.model_params, spec.max_call_tokens)
    return model_cache.digest(deps.llm.identity(model), action.messages, tools, action.schema, params)


def _settle(deps: Deps, state: AgentState, rid: str, usage: Usage, record: CallRecord) -> None:
    """Settle the call, or, where the ledger lets a settlement ride another write,
    leave it owed: when the reply ends the agent its final record carries it (a
    round trip less per one-call agent), and whatever the agent does next
    settles it first (``settle_owed``). Owed, it is lost with a worker that dies
    before that write, as a settle is with one that dies mid-call: the reservation
    stays live, and the rerun step calls again and settles."""
    ctx = state.ctx
    settling = deps.ledger.settling(
        ctx.job_id,
        ctx.chain,
        ctx.scopes,
        rid,
        tokens=usage.total_tokens,
        record=record.model_dump_json(),
        cost=usage.cost_micros,
        event=events.model_finished(state, rid, record),
    )
    if deps.ledger.settles_ride:
        state._unsettled = settling
    else:
        deps.ledger.settled(settling)


def settle_owed(deps: Deps, state: AgentState) -> None:
    """Settle the agent's last call, if its settlement is still owed: before
    anything the agent does but end (which carries it), and when its step ends
    any other way."""
    settling, state._unsettled = state._unsettled, None
    if settling is not None:
        deps.ledger.settled(settling)


def _checked(
    reply: ModelReply, offered_names: list[str], max_tokens: int, max_call_tokens: int, bound: Resource
) -> ModelReply | Stop:
    """The reply a strategy may use, or why the agent ends: a cut below the call's own
    cap names what the budget was short of (``bound``: tokens, cost or a window)."""
    if reply.finish_reason == "length":
        if max_tokens < max_call_tokens:
            what = {Resource.COST: "cost budget", Resource.TOKENS_PER_MINUTE: "per-minute window"}
            return Stop(
                Cause(kind=CauseKind.BUDGET, resource=bound),
                f"the model's reply was cut at {max_tokens} tokens, all the {what.get(bound, 'token budget')} "
                f"had left for it (max_call_tokens={max_call_tokens})",
            )
        return Stop.of(
            CauseKind.REPLY_CUT,
            f"the model's reply was cut at max_call_tokens={max_call_tokens}; {MAX_CALL_TOKENS_HINT}",
        )
    if reply.finish_reason == "content_filter":
        return Stop.of(CauseKind.CONTENT_FILTER, "the model's reply was withheld by its content filter")
    stray = [c.name for c in reply.tool_calls if c.name not in offered_names]
    if stray and not offered_names:  # no tool it could have meant
        return Stop.of(CauseKind.MALFORMED_REPLY, f"model called tool {stray[0]!r}, but this call offered no tools")
    # A name the model made up is the strategy's to answer, with the names it may use.
    return replace(reply, offered=tuple(offered_names)) if stray else reply


def _over_reserved(usage: Usage, prompt_reserved: int, reply_reserved: int) -> Stop | None:
    """A provider that reports more than the call was granted has spent past the
    caps (the ledger has charged it all): the agent stops rather than spend more."""
    for kind, reported, reserved in (
        ("prompt", usage.prompt_tokens, prompt_reserved),
        ("completion", usage.completion_tokens, reply_reserved),
    ):
        if reported > reserved:
            log.warning("provider over-reported: %s %s tokens, %s reserved", reported, kind, reserved)
            return Stop.of(
                CauseKind.MODEL_ERROR,
                f"the provider reported {reported} {kind} tokens, {reported - reserved} over the {reserved} "
                f"reserved for them; all {usage.total_tokens} tokens are charged",
            )
    return None


def seconds_left(now: datetime, *deadlines: datetime | None) -> float | None:
    """Seconds to the nearest deadline (at least a millisecond), or None without one."""
    given = [d for d in deadlines if d is not None]
    if not given:
        return None
    return max(0.001, (min(given) - now).total_seconds())
