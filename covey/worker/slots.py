"""An agent's step holds a running slot on its capped scopes; one that must wait gives its worker slot back.

Before a step the agent takes a slot on every scope of its that caps the agents
running at once (``covey.budgets.running``), and gives them back when the step
ends, whichever way. A thread per worker process renews the leases of the slots
its steps hold, so a worker that dies frees them within a lease.

An agent that finds a scope full, or a scope's per-minute window full, does not
sleep in its worker slot: its step checkpoints and ends, and its next step is
sent with a countdown (``Hop``), so the slot serves other jobs meanwhile. One
waiting for a cap joins the scope's queue, and each step that gives a slot back
(or, refused, leaves one free) sends the next step of each waiter admitted to it
at once (the countdown is only for a wake that went astray), so a freed slot is
taken again at once, in the queue's order, and waiters do not poll. A countdown
stays under the broker's patience: a Redis broker hands a message its worker has
not acknowledged within the visibility timeout to another worker, and a worker
holds a counted-down message unacknowledged from the moment it fetches it,
through the countdown and the step that follows.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

from covey import keys, redis_scripts
from covey.budgets.running import Taken
from covey.config.settings import Settings
from covey.status import Wait
from covey.store.outbox import Message
from covey.store.tree import Node
from covey.worker.agent_state import AgentState
from covey.worker.completion import Completion, taken_over
from covey.worker.deps import Deps

log = logging.getLogger(__name__)

# The longest countdown of one hop: a job cancelled meanwhile ends within it, and
# a wait longer than it (a minute's window) is taken in several hops.
MAX_HOP_SECONDS = 10.0
# Waiters admitted per slot given back until one is woken: those that ended
# meanwhile (cancelled, timed out) have no next step to wake and are passed over.
WAKE_TRIES = 3


@dataclass(frozen=True)
class Hop:
    """An agent gives its slot back: its next step is sent ``seconds`` from now; ``wait`` says why."""

    wait: Wait
    seconds: float


def longest_hop(settings: Settings) -> float:
    """A hop's countdown plus the step after it end before the visibility timeout."""
    spare = settings.redelivery_seconds - settings.slice_seconds - settings.longest_call_seconds
    return max(0.1, min(MAX_HOP_SECONDS, spare / 2))


def hop(deps: Deps, reason: str, seconds: float) -> Hop:
    """Wait ``seconds`` for ``reason``: the agent says so, and its next step comes
    after at most a hop (a longer wait is taken in several)."""
    until = deps.now() + timedelta(seconds=seconds)
    return Hop(Wait(reason=reason, until=until), min(seconds, longest_hop(deps.settings)))


class _Held:
    """The slots this process's steps hold: (job id, agent id, run) -> scopes,
    renewed by one thread; and the scopes where a refused step left a slot free,
    whose waiters it admits as it ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[tuple[str, str, str], tuple[str, ...]] = {}
        self._freed: dict[tuple[str, str, str], tuple[str, ...]] = {}
        self._renewer: threading.Thread | None = None

    def add(self, deps: Deps, step: tuple[str, str, str], scopes: tuple[str, ...]) -> None:
        with self._lock:
            self._slots[step] = scopes
            if self._renewer is None or not self._renewer.is_alive():  # a prefork child starts its own
                self._renewer = threading.Thread(target=self._renew, args=(deps,), name="covey-slots", daemon=True)
                self._renewer.start()

    def free(self, step: tuple[str, str, str], scopes: tuple[str, ...]) -> None:
        with self._lock:
            self._freed[step] = scopes

    def pop(self, step: tuple[str, str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The scopes the step holds, and those it left free."""
        with self._lock:
            return self._slots.pop(step, ()), self._freed.pop(step, ())

    def _renew(self, deps: Deps) -> None:
        while True:  # a daemon thread: it ends with its process, and so do the leases it renews
            time.sleep(keys.RUNNING_LEASE_SECONDS / 3)
            with self._lock:
                held = [(job, agent, scopes) for (job, agent, _), scopes in self._slots.items()]
            try:
                deps.slots.renew(held)
            except Exception:  # Redis away: the next renewal tries again, well within the lease
                log.exception("running slots: renewing their leases failed")


_held = _Held()


def take(
    deps: Deps, state: AgentState, holder: str = "", running: Node | None = None, expected: str | None = None
) -> Hop | Completion | None:
    """Take the agent's running slots for this run ``holder`` of its step, which took
    up the ``expected`` message (None for none), or the hop it waits instead. A
    duplicate of a step that runs or ran (a woken copy and its counted-down
    original both arrived) is dropped: if the other run dies, the reconciler sends
    the step again, which runs once the dead run's lease lapses. ``running``, its
    node, is recorded first in the same round trip."""
    ctx = state.ctx
    calls = [deps.tree.recording(ctx.job_id, running)] if running is not None else []
    if ctx.scopes:
        calls.append(deps.slots.taking(ctx.job_id, ctx.agent_id, ctx.scopes, holder, expected or ""))
    replies = redis_scripts.run(deps.redis, calls) if calls else []
    taken = deps.slots.taken(replies[-1]) if ctx.scopes else Taken(ok=True)
    if taken.elsewhere:
        return Completion.drop(
            f"agent {ctx.agent_id} of job {ctx.job_id} runs in another copy of this step: duplicate dropped"
        )
    if taken.ran:
        if not deps.still_held():  # the copy that ran is the one a worker took from this quiet one: say so
            return taken_over(ctx.job_id, ctx.agent_id)
        return Completion.drop(
            f"agent {ctx.agent_id} of job {ctx.job_id}: another copy of this step ran already: duplicate dropped"
        )
    if taken.ok:
        if taken.held:
            _held.add(deps, (ctx.job_id, ctx.agent_id, holder), taken.held)
        return None
    if taken.freed:
        _held.free((ctx.job_id, ctx.agent_id, holder), taken.freed)
    log.info("job %s agent %s gives its slot back: %s", ctx.job_id, ctx.agent_id, taken.reason)
    # Woken when a slot is given back; the countdown is for a wake that went astray.
    return hop(deps, taken.reason, longest_hop(deps.settings) * random.uniform(0.75, 1.0))


def give_back(deps: Deps, job_id: str, agent_id: str, holder: str = "") -> list[Message]:
    """Give back the slots the run ``holder`` of the agent's step holds, and any it
    left free when refused; the messages that wake the waiters admitted to them,
    for the caller to send."""
    held, freed = _held.pop((job_id, agent_id, holder))
    if not held and not freed:
        return []
    return _wake(deps, deps.slots.give_back(job_id, agent_id, held, freed))


def _wake(deps: Deps, admitted: list[tuple[str, str, str]]) -> list[Message]:
    """The next steps, at once, of the waiters admitted (scope, job id, agent id). One
    that waits no more (it ended: cancelled, timed out) has no next step to wake and
    passes its slot on to the next in the queue, up to ``WAKE_TRIES`` per slot."""
    woken, todo = [], list(admitted)
    passes = (WAKE_TRIES - 1) * len(todo)
    while todo:
        scope, job_id, agent_id = todo.pop()
        message = _next_step_now(deps, job_id, agent_id)
        if message is not None:
            woken.append(message)
        elif passes > 0:  # past them, the slot held for the last is free again within a wake lease
            passes -= 1
            todo += deps.slots.pass_on(scope, job_id, agent_id)
    return woken


def _next_step_now(deps: Deps, job_id: str, agent_id: str) -> Message | None:
    """A waiting agent's next step without its countdown; None if it waits no more."""
    stored = deps.outbox.expected(job_id, agent_id)
    return Message.loads(stored).now() if stored is not None else None
