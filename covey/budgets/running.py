"""Running slots: how many agents a scope lets hold a worker slot at once.

``covey scope tenant:acme --max-running 20`` caps the agents of that tenant that
take a step at the same moment, across every worker. An agent takes a slot on
each of its capped scopes before its step and gives it back when the step ends
(it finishes, pauses, fans out or waits); one that finds a scope full takes
none, joins the scope's queue of waiters and waits outside the worker
(``covey.worker.slots``): each slot given back wakes the first in the queue. Each slot is a lease
its worker renews, so a slot of a worker that died is free again within
``keys.RUNNING_LEASE_SECONDS`` instead of lost. The check and the take are one
Lua script (``lua/running.lua``), atomic across machines.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import redis

from covey import keys
from covey.budgets import scopes as scope_names
from covey.budgets.budget import MAX_COUNT
from covey.redis_scripts import Reply, ScriptCall, source

_TAKE = source("covey.budgets", "running.lua")


@dataclass(frozen=True)
class Taken:
    """Answer to ``take``: ``held`` lists the capped scopes it now holds a slot on; a
    refusal names the scope that is full and its count (``running`` of ``limit``)."""

    ok: bool
    held: tuple[str, ...] = ()
    scope: str | None = None
    running: int = 0
    limit: int = 0
    elsewhere: bool = False  # another run of the agent's step holds its slot: this one is a duplicate
    ran: bool = False  # another run of the agent's step ran it meanwhile: this one is a stale copy

    @property
    def reason(self) -> str:
        return f"{self.scope} running cap {self.running}/{self.limit}"


def member(job_id: str, agent_id: str) -> str:
    """An agent's member in a scope's running set."""
    return json.dumps([job_id, agent_id], separators=(",", ":"))


class RunningSlots:
    """The running caps of global scopes, on one Redis client. ``clock`` gives unix
    seconds and stamps leases: workers' clocks must agree to well within a lease."""

    def __init__(self, client: redis.Redis, clock: Callable[[], float] = time.time) -> None:
        self.client, self.clock = client, clock
        self._take = client.register_script(_TAKE)

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
        row_keys = [
            *(keys.scope(s) for s in scopes),
            *(keys.scope_running(s) for s in scopes),
            *(keys.scope_waiting(s) for s in scopes),
            *(keys.scope_holders(s) for s in scopes),
            keys.expected(job_id),
        ]
        lease, waiting = keys.RUNNING_LEASE_SECONDS, keys.WAITING_TTL_SECONDS
        args = [member(job_id, agent_id), now, now + lease, lease, waiting, holder, agent_id, expected, *scopes]
        return ScriptCall(self._take, row_keys, args)

    @staticmethod
    def taken(reply: list[Any]) -> Taken:
        status, *rest = reply
        if status == Reply.OK:
            return Taken(ok=True, held=tuple(_str(s) for s in rest))
        if status == Reply.ELSEWHERE:
            return Taken(ok=False, scope=_str(rest[0]), elsewhere=True)
        if status == Reply.MOVED_ON:
            return Taken(ok=False, ran=True)
        name, running, limit = rest
        return Taken(ok=False, scope=_str(name), running=int(running), limit=int(limit))

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

    def give_back(self, job_id: str, agent_id: str, scopes: Iterable[str]) -> list[tuple[str, str, str]]:
        """Free the agent's slots, and take the first waiter off each scope's queue:
        (scope, job id, agent id) of each, for the caller to wake."""
        scopes = list(scopes)
        with self.client.pipeline(transaction=False) as pipe:
            for s in scopes:
                pipe.zrem(keys.scope_running(s), member(job_id, agent_id))
                pipe.hdel(keys.scope_holders(s), member(job_id, agent_id))
                pipe.zpopmin(keys.scope_waiting(s))
            replies = pipe.execute()
        return [(s, *_waiter(popped[0][0])) for s, popped in zip(scopes, replies[2::3]) if popped]

    def next_waiter(self, name: str) -> tuple[str, str] | None:
        """Take the first waiter off scope ``name``'s queue: (job id, agent id), or None."""
        popped = self.client.zpopmin(keys.scope_waiting(name))
        return _waiter(popped[0][0]) if popped else None

    def waiting(self, name: str) -> int:
        """Agents in scope ``name``'s queue for a slot."""
        return int(self.client.zcard(keys.scope_waiting(name)))

    def running(self, name: str) -> int:
        """Agents holding a live slot on scope ``name``."""
        return int(self.client.zcount(keys.scope_running(name), self.clock(), "+inf"))


def _str(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _waiter(raw: str | bytes) -> tuple[str, str]:
    job_id, agent_id = json.loads(_str(raw))
    return job_id, agent_id
