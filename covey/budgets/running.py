"""Running slots: how many agents a scope lets hold a worker slot at once.

``covey scope tenant:acme --max-running 20`` caps the agents of that tenant that
take a step at the same moment, across every worker. An agent takes a slot on
each of its capped scopes before its step and gives it back when the step ends
(it finishes, pauses, fans out or waits); one that finds a scope full takes
none, joins the scope's queue of waiters and waits outside the worker
(``covey.worker.slots``). Each slot given back admits the next waiter: the slot
is held for it while its step is woken, and while agents wait no newcomer takes
a free slot out of turn. The queue is a weighted fair queue (``lua/turns.lua``):
tenants waiting together are admitted in proportion to their weights
(``covey scope tenant:acme --weight 3``; 1 unless set; jobs of no tenant are
together one tenant of weight 1). Each slot is a lease its worker renews, so a
slot of a worker that died is free again within ``keys.RUNNING_LEASE_SECONDS``
instead of lost, and a slot held for a woken waiter lapses within
``keys.WAKE_LEASE_SECONDS``. The check and the take are one Lua script
(``lua/running.lua``), atomic across machines, and so are the give-back and the
admission (``lua/admit.lua``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

import redis

from covey import keys
from covey.budgets import scopes as scope_names
from covey.budgets.budget import MAX_COUNT
from covey.redis_scripts import Reply, ScriptCall, run, source

_TURNS = (files("covey.budgets") / "lua" / "turns.lua").read_text(encoding="utf-8")
_TAKE = source("covey.budgets", "running.lua", _TURNS)
_ADMIT = source("covey.budgets", "admit.lua", _TURNS)
# A tenant's share against another's: beyond a thousandfold the smaller one is all but stopped.
MAX_WEIGHT = 1000


@dataclass(frozen=True)
class Taken:
    """Answer to ``take``: ``held`` lists the capped scopes it now holds a slot on; a
    refusal names the scope that refuses it, its slots taken (``running`` of
    ``limit``, those held for woken waiters counted) and the waiters ``ahead`` of it,
    and ``freed`` the scopes where it left a slot for waiters to be admitted to."""

    ok: bool
    held: tuple[str, ...] = ()
    scope: str | None = None
    running: int = 0
    limit: int = 0
    ahead: int = 0
    freed: tuple[str, ...] = ()
    elsewhere: bool = False  # another run of the agent's step holds its slot: this one is a duplicate
    ran: bool = False  # another run of the agent's step ran it meanwhile: this one is a stale copy

    @property
    def reason(self) -> str:
        full = f"{self.scope} running cap {self.running}/{self.limit}"
        return full if self.running >= self.limit else f"{full}, {self.ahead} waiting ahead of it"


def member(job_id: str, agent_id: str) -> str:
    """An agent's member in a scope's running set."""
    return json.dumps([job_id, agent_id], separators=(",", ":"))


class RunningSlots:
    """The running caps of global scopes, on one Redis client. ``clock`` gives unix
    seconds and stamps leases: workers' clocks must agree to well within a lease."""

    def __init__(self, client: redis.Redis, clock: Callable[[], float] = time.time) -> None:
        self.client, self.clock = client, clock
        self._take = client.register_script(_TAKE)
        self._admit = client.register_script(_ADMIT)

    def set_cap(self, name: str, max_running: int | None) -> None:
        """Cap the agents of scope ``name`` running at once (None removes the cap),
        creating the scope if it was not."""
        scope_names.check(name)
        if max_running is not None and not 0 <= max_running <= MAX_COUNT:
            raise ValueError(f"scope {name}: max_running must be from 0 to {MAX_COUNT}, got {max_running}")
        with self.client.pipeline(transaction=True) as pipe:
            if max_running is None:
                pipe.hdel(keys.scope(name), "running_limit")
            else:
                pipe.hset(keys.scope(name), "running_limit", max_running)
            pipe.sadd(keys.scopes_index(), name)
            pipe.execute()

    def set_weight(self, name: str, weight: int) -> None:
        """Give tenant scope ``name`` ``weight`` shares of every capped scope its agents
        wait for, creating the scope if it was not."""
        scope_names.check(name)
        if scope_names.kind(name) != scope_names.TENANT:
            raise ValueError(f"scope {name}: a weight is a tenant's share; give it to a tenant:<name> scope")
        if not 1 <= weight <= MAX_WEIGHT:
            raise ValueError(f"scope {name}: weight must be from 1 to {MAX_WEIGHT}, got {weight}")
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(keys.scope(name), "weight", weight)
            pipe.sadd(keys.scopes_index(), name)
            pipe.execute()

    def take(self, job_id: str, agent_id: str, scopes: list[str], holder: str = "", expected: str = "") -> Taken:
        """A slot on every capped scope of ``scopes`` for the run ``holder`` of the
        agent's step, which took up the ``expected`` message ('' for none), or none
        and the scope that is full (or, ``elsewhere``, whose slot another run of the
        agent's step holds; or, ``ran``, the message is expected no more)."""
        if not scopes:
            return Taken(ok=True)
        call = self.taking(job_id, agent_id, scopes, holder, expected)
        return self.taken(call())

    def taking(self, job_id: str, agent_id: str, scopes: list[str], holder: str = "", expected: str = "") -> ScriptCall:
        """``take``'s script call (``scopes`` not empty), for a caller that runs it with
        others in one round trip and reads its reply with ``taken``."""
        now = self.clock()
        lease, waiting = keys.RUNNING_LEASE_SECONDS, keys.WAITING_TTL_SECONDS
        tenant = next((i for i, s in enumerate(scopes, 1) if scope_names.kind(s) == scope_names.TENANT), 0)
        args = [member(job_id, agent_id), now, now + lease, lease, waiting, holder, agent_id, expected, tenant]
        return ScriptCall(self._take, [*_queue_keys(scopes), keys.expected(job_id)], [*args, *scopes])

    @staticmethod
    def taken(reply: list[Any]) -> Taken:
        status, *rest = reply
        if status == Reply.OK:
            return Taken(ok=True, held=tuple(_str(s) for s in rest))
        if status == Reply.ELSEWHERE:
            return Taken(ok=False, scope=_str(rest[0]), elsewhere=True)
        if status == Reply.MOVED_ON:
            return Taken(ok=False, ran=True)
        name, running, limit, ahead, *freed = rest
        return Taken(
            ok=False,
            scope=_str(name),
            running=int(running),
            limit=int(limit),
            ahead=int(ahead),
            freed=tuple(_str(s) for s in freed),
        )

    def renew(self, held: Iterable[tuple[str, str, tuple[str, ...]]]) -> None:
        """Push back the lease of every (job id, agent id, scopes) still held; one
        whose lease lapsed is not taken again (another agent may have its slot)."""
        expiry = self.clock() + keys.RUNNING_LEASE_SECONDS
        with self.client.pipeline(transaction=False) as pipe:
            for job_id, agent_id, scopes in held:
                for s in scopes:
                    pipe.zadd(keys.scope_running(s), {member(job_id, agent_id): expiry}, xx=True)
                    pipe.expire(keys.scope_running(s), keys.RUNNING_LEASE_SECONDS)
                    pipe.expire(keys.scope_holders(s), keys.RUNNING_LEASE_SECONDS)
            pipe.execute()

    def give_back(
        self, job_id: str, agent_id: str, held: Iterable[str], freed: Iterable[str] = ()
    ) -> list[tuple[str, str, str]]:
        """Free the agent's slots on the scopes ``held``, and admit waiters to every
        slot free there and on the scopes ``freed`` (a refused take's): (scope, job
        id, agent id) of each, for the caller to wake; its slot is held for it
        meanwhile."""
        calls = [self._admitting(member(job_id, agent_id), list(held)), self._admitting("", list(freed))]
        return [w for reply in run(self.client, [c for c in calls if c.keys]) for w in _woke(reply)]

    def pass_on(self, name: str, job_id: str, agent_id: str) -> list[tuple[str, str, str]]:
        """Give up the slot held for a woken waiter of scope ``name`` that waits no
        more (it ended), admitting the next waiters to what is free: as ``give_back``."""
        return _woke(self._admitting(member(job_id, agent_id), [name])())

    def _admitting(self, giving_back: str, scopes: list[str]) -> ScriptCall:
        now = self.clock()
        args = [giving_back, now, now + keys.WAKE_LEASE_SECONDS, keys.WAKE_LEASE_SECONDS, keys.WAITING_TTL_SECONDS]
        return ScriptCall(self._admit, _queue_keys(scopes), [*args, *scopes])

    def waiting(self, name: str) -> int:
        """Agents in scope ``name``'s queue for a slot."""
        return int(self.client.zcard(keys.scope_waiting(name)))

    def running(self, name: str) -> int:
        """Agents holding a live slot on scope ``name``."""
        return int(self.client.zcount(keys.scope_running(name), self.clock(), "+inf"))


def _str(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _queue_keys(scopes: list[str]) -> list[str]:
    """The keys of the scopes' slots and queues, in the order the scripts read them."""
    per_scope = (
        keys.scope,
        keys.scope_running,
        keys.scope_waiting,
        keys.scope_holders,
        keys.scope_woken,
        keys.scope_turns,
    )
    return [key(s) for key in per_scope for s in scopes]


def _woke(reply: list[Any]) -> list[tuple[str, str, str]]:
    """(scope, job id, agent id) of each waiter an ``admit.lua`` reply admitted."""
    _, *flat = reply
    return [(_str(s), *_waiter(w)) for s, w in zip(flat[::2], flat[1::2])]


def _waiter(raw: str | bytes) -> tuple[str, str]:
    job_id, agent_id = json.loads(_str(raw))
    return job_id, agent_id
