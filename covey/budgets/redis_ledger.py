"""The ledger on Redis: each check-and-charge is one Lua script, so it is atomic
across every worker on every machine.

Python builds every key (``covey.keys``) and passes it in ``KEYS``; the scripts in
``lua/`` never build a key. A job's keys share its ``{job_id}`` hash tag. Global
scope rows are not per job: a script that charges scopes touches keys of more than
one slot, so these scripts need a single Redis node (or a cluster proxy that allows it).

Redis replicates asynchronously: a master that fails over may take its last
acknowledged writes with it, and a charge lost that way is overspend or a model
call billed twice. With ``ReplicaWait.replicas`` set (``COVEY_LEDGER_REPLICAS``,
on by default under Sentinel), a script's reply counts only once that many
replicas hold its writes (``WAIT``, sent in the script's round trip). A reply
fewer replicas confirmed is not acted on: the script is run again (it is
idempotent by reservation id, so on the same master it changes nothing, and on
a promoted replica that lacks the write it writes it there) until enough
confirm, or ``ReplicaWait.seconds`` pass and ``ReplicasBehind``, a connection
error, hands the step back as an outage would.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import redis

from covey import keys, redis_scripts
from covey.budgets import cancels
from covey.budgets import scopes as scope_names  # `scopes` here are a call's list of names
from covey.budgets.budget import MAX_COUNT, MAX_USD, Budget
from covey.budgets.ledger import (
    TOTALS,
    AgentRow,
    AgentTerms,
    FirstRun,
    Grant,
    LedgerError,
    LedgerSnapshot,
    Left,
    Opened,
    Pricing,
    ScopeRow,
    Settling,
)
from covey.budgets.prices import micros, usd
from covey.errors import StateLost
from covey.redis_scripts import Reply, source
from covey.status import Cause, CauseKind, Resource

# The scripts that write a job's events with the state they report (``covey.events``).
_EVENTFUL = ("open", "reserve", "settle", "tool_call", "tool_done")
_LUA = {
    name: source("covey.budgets", f"{name}.lua", events=name in _EVENTFUL)
    for name in ("open", "root", "reserve", "settle", "release", "tool_call", "tool_done")
}

# Expired reservations released per sweep: bounds its cost on the hot path; a
# backlog drains over the next sweeps.
STALE_SWEEP_BATCH = 20
# How long a call held up by others in flight waits before asking again (half to one
# and a half of it, so the waiters do not all ask at once): about a model call's time.
HELD_UP_SECONDS = 1.0
# A process sweeps for a dead worker's expired reservations at most this often,
# from its next reserve: one round trip per interval, not one per model call.
STALE_SWEEP_SECONDS = 5.0

# How long one WAIT blocks for a replica that is behind; then the script runs
# again. Well under the sockets' timeout (covey.config.connections).
REPLICA_WAIT_MS = 1_000

log = logging.getLogger(__name__)

_COUNTS = ("tokens_used", "cycles_used", "agents_spawned", "tool_calls_used")
_LIMITS = ("tokens_limit", "cycles_limit", "agents_limit", "tool_calls_limit")


class ReplicasBehind(redis.ConnectionError):
    """A ledger write fewer replicas confirmed than asked, for the whole allowance:
    to its caller the ledger is away (an outage), never a charge it may rely on."""


@dataclass(frozen=True)
class ReplicaWait:
    """``replicas`` that must hold a script's writes before its reply counts (0:
    none, Redis's own asynchronous replication), waited for up to ``seconds``."""

    replicas: int = 0
    seconds: float = 120.0


class RedisLedger:
    """``Ledger`` on one Redis client (any ``decode_responses`` setting).

    ``job_ttl``: seconds a job's rows live after their last write (``COVEY_JOB_TTL``).
    ``clock`` gives unix seconds; it stamps reservation expiries, so workers'
    clocks should agree to well within ``keys.RESERVATION_TTL_SECONDS``.
    """

    def __init__(
        self,
        client: redis.Redis,
        job_ttl: int,
        clock: Callable[[], float] = time.time,
        replicas: ReplicaWait | None = None,
    ) -> None:
        self.client, self.job_ttl = client, job_ttl
        self.clock = clock
        self.replicas = replicas or ReplicaWait()
        self._scripts = {name: client.register_script(src) for name, src in _LUA.items()}
        self._next_sweep = float("-inf")

    # -- agents -------------------------------------------------------------

    def open_root(
        self,
        job_id: str,
        agent_id: str,
        budget: Budget,
        terms: AgentTerms | None = None,
        run: FirstRun | None = None,
        event: str = "",
    ) -> AgentRow | None:
        terms, run = terms or AgentTerms(), run or FirstRun()
        row, now = keys.agent(job_id, agent_id), self.clock()
        extras = [
            self.job_ttl,
            _arg(budget.max_tool_calls),
            terms.digest or "",
            run.delivery,
            now + run.seconds,
            now,
            run.replaces,
            *(terms.scopes or []),
        ]
        opened, raw = self._run_calls(
            "open",
            [
                self._call("open", *self._open_call(job_id, [], agent_id, budget, terms, event)),
                self._call("root", [row, keys.job_scopes(job_id)], extras),
            ],
        )
        self._opened(job_id, opened)
        return agent_row(agent_id, dict(zip(raw[::2], raw[1::2]))) if raw else None

    def open(
        self,
        job_id: str,
        chain: list[str],
        child_id: str,
        budget: Budget,
        terms: AgentTerms | None = None,
        event: str = "",
    ) -> Opened:
        return self.open_many(job_id, chain, [(child_id, budget, terms or AgentTerms())], [event])[0]

    def open_many(
        self,
        job_id: str,
        chain: list[str],
        children: Sequence[tuple[str, Budget, AgentTerms]],
        events: Sequence[str] = (),
    ) -> list[Opened]:
        if not chain:
            raise ValueError("open needs the child's ancestors (root..parent); use open_root for a root")
        for child_id, _, _ in children:
            if child_id in chain:
                raise ValueError(f"agent {child_id} cannot be its own ancestor")
        said = [*events, *[""] * (len(children) - len(events))]
        calls = [
            self._open_call(job_id, chain, child_id, budget, terms, event)
            for (child_id, budget, terms), event in zip(children, said)
        ]
        return [self._opened(job_id, reply) for reply in self._run_many("open", calls)]

    def _open_call(
        self, job_id: str, chain: list[str], child_id: str, budget: Budget, terms: AgentTerms, event: str
    ) -> tuple[list[str], list[Any]]:
        """The keys and arguments of ``open.lua`` for one agent."""
        args = [
            child_id,
            _arg(budget.max_tokens),
            _arg(budget.max_cycles),
            _arg(budget.max_agents),
            budget.max_depth,
            budget.deadline.isoformat() if budget.deadline else "",
            self.job_ttl,
            _tools_field(terms.tools),
            json.dumps(terms.deny),
            _arg(terms.max_cycles),
            "" if terms.scopes is None else json.dumps(terms.scopes),
            terms.digest or "",
            terms.spec or "",
            "" if terms.child_fraction is None else repr(terms.child_fraction),
            _arg(terms.priority),
            *chain,
            _arg(None if budget.max_cost is None else micros(budget.max_cost)),
        ]
        row_keys = [keys.agent(job_id, child_id), keys.agents(job_id), *(keys.agent(job_id, a) for a in chain)]
        return self._with_events(job_id, row_keys, args, event)

    @staticmethod
    def _opened(job_id: str, reply: list[Any]) -> Opened:
        status, *rest = reply
        if status == Reply.MISSING:
            raise _lost(job_id, rest[0])
        if status == Reply.REFUSED:
            return Opened(ok=False, budget=None, reason=_str(rest[0]), cause=_short(CauseKind.BUDGET, *rest[1:]))
        fields: dict[str, Any] = dict(zip(("max_tokens", "max_cycles", "max_agents", "max_depth"), map(_int, rest[:4])))
        fields["deadline"] = _deadline(rest[4])
        fields["max_cost"] = usd(_int(rest[5]))
        # A clamp may leave 0 tokens or cycles: the child's first reserve is then refused.
        return Opened(ok=True, budget=Budget(**fields), reason=None)

    def agent(self, job_id: str, agent_id: str) -> AgentRow | None:
        raw = self.client.hgetall(keys.agent(job_id, agent_id))
        return agent_row(agent_id, raw) if raw else None

    # -- reservations ---------------------------------------------------------

    def reserve(
        self,
        job_id: str,
        chain: list[str],
        scopes: list[str],
        reservation_id: str,
        tokens: int,
        min_tokens: int,
        cycle: int | None = None,
        pricing: Pricing | None = None,
        event: str = "",
        keep: int = 0,
    ) -> Grant:
        if not chain:
            raise ValueError("reserve needs the agent's chain (root..agent)")
        if tokens < 1 or not 0 <= min_tokens <= tokens:
            raise ValueError(
                f"need 0 <= min_tokens <= tokens and tokens >= 1, got tokens={tokens} min_tokens={min_tokens}"
            )
        now = self.clock()
        if now >= self._next_sweep:
            self._next_sweep = now + STALE_SWEEP_SECONDS
            self.release_stale(now)
        minute = int(now // keys.WINDOW_SECONDS)
        flag, stopped = cancels.keys(job_id)
        row_keys = [
            flag,
            keys.calls(job_id),
            keys.job_scopes(job_id),
            stopped,
            *self._rows(job_id, chain, scopes),
            *(keys.scope_window(s, minute) for s in scopes),
            keys.replies(job_id, chain[-1]),
            keys.live_reservations(),
        ]
        args = [
            reservation_id,
            tokens,
            min_tokens,
            now + keys.RESERVATION_TTL_SECONDS,
            len(chain),
            _compact(chain),
            _member(job_id, reservation_id),
            _arg(cycle),
            keys.WINDOW_TTL_SECONDS,
            self.job_ttl,
            *chain,
            *scopes,
            *(pricing or Pricing(model="", price=None, prompt_tokens=0)).args(),
            keep,
        ]
        status, granted, reason, *rest = self._run("reserve", *self._with_events(job_id, row_keys, args, event))
        if status == Reply.MISSING:
            raise _lost(job_id, reason)
        if status == Reply.CANCELLED:
            return Grant(ok=False, tokens=0, reason=_str(reason), cause=Cause(kind=CauseKind.CANCELLED))
        if status == Reply.PARENT_CANCELLED:
            reason = cancels.by_parent(_str(reason), chain[-1])
            return Grant(ok=False, tokens=0, reason=reason, cause=Cause(kind=CauseKind.CANCELLED))
        if status == Reply.NO_PRICES:
            return Grant(ok=False, tokens=0, reason=_str(reason), cause=Cause(kind=CauseKind.INVALID_SPEC))
        if status in (Reply.WINDOW_FULL, Reply.HELD_UP):  # ask again later
            if status == Reply.WINDOW_FULL:  # the next minute's is empty
                kind, retry_after = CauseKind.RATE_LIMITED, (minute + 1) * keys.WINDOW_SECONDS - now
            else:  # room frees as the calls in flight settle: spread the askers out
                kind, retry_after = CauseKind.BUDGET, HELD_UP_SECONDS * random.uniform(0.5, 1.5)
            row, name, resource = rest[:3]
            cause = _short(kind, row, name, resource, retry_after=retry_after)
            return Grant(ok=False, tokens=0, reason=_str(reason), cause=cause)
        if status != Reply.OK:
            return Grant(ok=False, tokens=0, reason=_str(reason), cause=_short(CauseKind.BUDGET, *rest))
        record, bound = _str(rest[0]), Resource(_str(rest[2]))
        return Grant(ok=True, tokens=int(granted), reason=None, record=record or None, cost=int(rest[1]), bound=bound)

    def settle(
        self,
        job_id: str,
        chain: list[str],
        scopes: list[str],
        reservation_id: str,
        tokens: int,
        record: str | None = None,
        cost: int = 0,
        event: str = "",
    ) -> bool:
        """Charge ``tokens`` and ``cost`` (the actual usage) and keep ``record`` for a replay.
        Pass the chain and scopes given to ``reserve``; a mismatch raises
        ``LedgerError`` rather than skew the counts, and rows gone from Redis
        ``StateLost`` rather than come back uncapped and without their TTL."""
        return self.settled(self.settling(job_id, chain, scopes, reservation_id, tokens, record, cost, event))

    def settling(
        self,
        job_id: str,
        chain: list[str],
        scopes: list[str],
        reservation_id: str,
        tokens: int,
        record: str | None = None,
        cost: int = 0,
        event: str = "",
    ) -> Settling:
        if tokens < 0 or cost < 0:
            raise ValueError(f"tokens and cost used cannot be negative, got {tokens} and {cost}")
        row_keys = [
            keys.calls(job_id),
            *self._rows(job_id, chain, scopes),
            keys.replies(job_id, chain[-1]),
            keys.live_reservations(),
        ]
        args = [
            reservation_id,
            tokens,
            self.job_ttl,
            _compact(chain),
            _member(job_id, reservation_id),
            record or "",
            len(chain),
            *scopes,
            cost,
        ]

        def charged(reply: Any) -> bool:
            status, reason = reply
            if status == Reply.MISSING:
                raise _lost(job_id, reason)
            if status == Reply.MISMATCH:
                raise LedgerError(
                    f"job {job_id}: settle of {reservation_id} names another chain or scopes than its reserve"
                )
            return status == Reply.OK  # ALREADY: settled before

        return Settling(self._call("settle", *self._with_events(job_id, row_keys, args, event)), charged)

    def settled(self, settling: Settling) -> bool:
        call = settling.call
        reply = call() if not self.replicas.replicas else self._run_calls("settle", [call])[0]
        return settling.charged(reply)

    @property
    def settles_ride(self) -> bool:
        return not self.replicas.replicas

    def count_tool_call(self, job_id: str, chain: list[str], call_id: str, event: str = "") -> Grant:
        row_keys = [
            keys.calls(job_id),
            *(keys.agent(job_id, a) for a in chain),
            keys.replies(job_id, chain[-1]),
        ]
        status, *rest = self._run(
            "tool_call", *self._with_events(job_id, row_keys, [call_id, self.job_ttl, *chain], event)
        )
        if status == Reply.MISSING:
            raise _lost(job_id, rest[0])
        if status == Reply.REFUSED:
            cause = Cause(kind=CauseKind.BUDGET, resource=Resource.TOOL_CALLS, agent_id=_str(rest[1]))
            return Grant(ok=False, tokens=0, reason=_str(rest[0]), cause=cause)
        return Grant(ok=True, tokens=0, reason=None, record=_str(rest[1]) if rest[0] == 1 else None)

    def record_tool_call(self, job_id: str, agent_id: str, call_id: str, record: str, event: str = "") -> None:
        self._run(
            "tool_done",
            *self._with_events(job_id, [keys.replies(job_id, agent_id)], [call_id, record, self.job_ttl], event),
        )

    def left(self, job_id: str, chain: list[str], scopes: list[str]) -> Left:
        rows = [keys.agent(job_id, a) for a in chain] + [keys.scope(s) for s in scopes]
        fields = ("tokens_limit", "tokens_held", "cost_limit", "cost_held", "cycles_limit", "cycles_used")
        with self.client.pipeline(transaction=False) as pipe:
            for row in rows:
                pipe.hmget(row, fields)
            found = pipe.execute()

        def least(limit: int, held: int) -> int | None:
            room = [int(r[limit]) - int(r[held] or 0) for r in found if r[limit] is not None]
            return max(0, min(room)) if room else None

        return Left(tokens=least(0, 1), cost=usd(least(2, 3)), cycles=least(4, 5))

    def release_stale(self, now: float | None = None) -> int:
        """Give back the holds of reservations past their expiry, in every job.

        Every ``reserve`` calls this first, so a dead worker's hold on a global
        scope frees up even when its own job never reserves again.
        """
        now = self.clock() if now is None else now
        expired = self.client.zrangebyscore(keys.live_reservations(), "-inf", f"({now}", start=0, num=STALE_SWEEP_BATCH)
        released = 0
        for member in expired:
            job_id, rid = json.loads(member)
            data = self.client.hget(keys.calls(job_id), rid)
            if data is None or not _str(data).startswith("{"):  # settled, or its job expired: nothing is held
                self.client.zrem(keys.live_reservations(), member)
                continue
            where = json.loads(data)
            row_keys = [
                keys.calls(job_id),
                *self._rows(job_id, where["chain"], where["scopes"]),
                keys.live_reservations(),
            ]
            released += self._run("release", row_keys, [rid, now, data, member])
        return released

    def _with_events(
        self, job_id: str, row_keys: list[str], args: list[Any], *events: str
    ) -> tuple[list[str], list[Any]]:
        """A script's keys and arguments, followed by the job's ``events`` it writes
        with the state they report (``covey/lua/events.lua``)."""
        more_keys, more_args = redis_scripts.events_tail(keys.events(job_id), self.job_ttl, [e for e in events if e])
        return [*row_keys, *more_keys], [*args, *more_args]

    def _run(self, name: str, row_keys: list[str], args: list[Any]) -> Any:
        """Script ``name``'s reply, once ``self.replicas`` replicas hold its writes.
        A reply after a rerun is the rerun's: a settle that charged on the first
        run answers "already settled"."""
        if not self.replicas.replicas:
            return self._scripts[name](keys=row_keys, args=args)
        return self._run_many(name, [(row_keys, args)])[0]

    def _run_many(self, name: str, calls: Sequence[tuple[list[str], list[Any]]]) -> list[Any]:
        """Script ``name`` run once per (keys, arguments) of ``calls``, in order, in one round trip."""
        return self._run_calls(name, [self._call(name, row_keys, args) for row_keys, args in calls])

    def _call(self, name: str, row_keys: list[str], args: list[Any]) -> redis_scripts.ScriptCall:
        return redis_scripts.ScriptCall(self._scripts[name], row_keys, args)

    def _run_calls(self, what: str, run: Sequence[redis_scripts.ScriptCall]) -> list[Any]:
        """The replies of ``run``'s script calls, in order, from one round trip, once
        ``self.replicas`` replicas hold their writes (``what`` names them in a warning).
        Replicas behind rerun them all, which is safe: each script is safe to run again."""
        wanted = self.replicas.replicas
        give_up, told = time.monotonic() + self.replicas.seconds, False
        while True:
            replies = redis_scripts.run(self.client, run, wanted, REPLICA_WAIT_MS)
            if not wanted:
                return replies
            *replies, confirmed = replies
            if confirmed >= wanted:
                return replies
            if time.monotonic() >= give_up:
                raise ReplicasBehind(
                    f"ledger write confirmed by {confirmed} of the {wanted} replica(s) COVEY_LEDGER_REPLICAS "
                    f"asks for, for {self.replicas.seconds:g}s"
                )
            if not told:
                told = True
                log.warning(
                    "ledger %s confirmed by %d of %d replica(s): run again until one more confirms, for up to %gs",
                    what,
                    confirmed,
                    wanted,
                    self.replicas.seconds,
                )

    @staticmethod
    def _rows(job_id: str, chain: list[str], scopes: list[str]) -> list[str]:
        return [*(keys.agent(job_id, a) for a in chain), *(keys.scope(s) for s in scopes)]

    # -- reading --------------------------------------------------------------

    def snapshot(self, job_id: str) -> LedgerSnapshot:
        ids = sorted(_str(a) for a in self.client.smembers(keys.agents(job_id)))
        names = sorted(_str(s) for s in self.client.smembers(keys.job_scopes(job_id)))
        with self.client.pipeline(transaction=True) as pipe:
            for a in ids:
                pipe.hgetall(keys.agent(job_id, a))
            pipe.exists(keys.cancel(job_id))
            *rows, cancelled = pipe.execute()
        agents = sorted((agent_row(a, r) for a, r in zip(ids, rows) if r), key=lambda row: (row.depth, row.agent_id))
        root = next((row for row in agents if row.depth == 0), None)
        totals = {} if root is None else root.model_dump(include=set(TOTALS))
        return LedgerSnapshot(
            job_id=job_id,
            root_id=root.agent_id if root else None,
            cancelled=bool(cancelled),
            agents=agents,
            scopes=self._scope_rows(names),
            **totals,
        )

    def set_scope(
        self,
        name: str,
        max_tokens: int | None,
        max_cycles: int | None,
        tokens_per_minute: int | None = None,
        requests_per_minute: int | None = None,
        max_cost: float | None = None,
    ) -> None:
        """Write every cap of a global scope, creating it; ``None`` removes a cap."""
        scope_names.check(name)
        if max_cost is not None and not 0 <= max_cost <= MAX_USD:
            raise ValueError(f"scope {name}: max_cost must be from 0 to {MAX_USD} USD, got {max_cost}")
        caps = {
            "tokens_limit": ("max_tokens", max_tokens),
            "cycles_limit": ("max_cycles", max_cycles),
            "tpm_limit": ("tokens_per_minute", tokens_per_minute),
            "rpm_limit": ("requests_per_minute", requests_per_minute),
            "cost_limit": ("max_cost", None if max_cost is None else micros(max_cost)),
        }
        for field, cap in caps.values():
            if cap is not None and cap < 0:
                raise ValueError(f"scope {name}: {field} cannot be negative, got {cap}")
            if cap is not None and cap > MAX_COUNT:
                raise ValueError(f"scope {name}: {field} cannot be over {MAX_COUNT}, got {cap}")
        key = keys.scope(name)
        with self.client.pipeline(transaction=True) as pipe:
            for field, (_, cap) in caps.items():
                if cap is None:
                    pipe.hdel(key, field)
                else:
                    pipe.hset(key, field, cap)
            pipe.sadd(keys.scopes_index(), name)
            pipe.execute()

    def has_scope(self, name: str) -> bool:
        return bool(self.client.sismember(keys.scopes_index(), name))

    def scope_rows(self) -> list[ScopeRow]:
        return self._scope_rows(sorted(_str(s) for s in self.client.smembers(keys.scopes_index())))

    def _scope_rows(self, names: list[str]) -> list[ScopeRow]:
        """The scopes' rows, each with its agents running now (``covey.budgets.running``)."""
        now = self.clock()
        with self.client.pipeline(transaction=False) as pipe:
            for s in names:
                pipe.hgetall(keys.scope(s))
                pipe.zcount(keys.scope_running(s), now, "+inf")  # live leases only
                pipe.zcard(keys.scope_waiting(s))
            found = pipe.execute()
        rows = [_scope_row(s, r) for s, r in zip(names, found[::3])]
        counts = zip(found[1::3], found[2::3])
        return [row.model_copy(update={"running": r, "waiting": w}) for row, (r, w) in zip(rows, counts)]


def _short(
    kind: CauseKind, row: str | bytes, name: str | bytes, resource: str | bytes, retry_after: float | None = None
) -> Cause:
    """A refusal's cause from a script's answer: the short row ('agent' or 'scope'), its name, and what it lacks."""
    short, agent = _str(name), _str(row) == "agent"
    return Cause(
        kind=kind,
        resource=Resource(_str(resource)),
        retry_after=retry_after,
        agent_id=short if agent else None,
        scope=None if agent else short,
    )


def _lost(job_id: str, reason: str | bytes) -> StateLost:
    """A script found a row it needs missing: never opened (a caller's bug) or, for an
    agent that is running, gone from Redis with the rest of its job's records."""
    return StateLost(f"job {job_id}: {_str(reason)} (never opened, or gone from Redis: wiped or expired)")


def _member(job_id: str, reservation_id: str) -> str:
    """A reservation's member in ``keys.live_reservations()``."""
    return json.dumps([job_id, reservation_id], separators=(",", ":"))


def _compact(chain: list[str]) -> str:
    """The chain as the reservation's data stores it; settle finds it there byte for byte."""
    return json.dumps(chain, separators=(",", ":"))


def _tools_field(tools: list[str] | None) -> str:
    """A row's tools: '' for every tool, else '=' and the names joined by commas. A
    JSON list of the default tools passes 64 bytes, the longest value Redis keeps a
    hash compact for: it would triple the row's memory."""
    return "" if tools is None else "=" + ",".join(tools)


def _tool_names(field: str | None) -> list[str] | None:
    if not field:
        return None
    return [name for name in field.removeprefix("=").split(",") if name]


def _arg(value: int | None) -> int | str:
    return "" if value is None else value


def _str(value: str | bytes | None) -> str:
    return value.decode() if isinstance(value, bytes) else (value or "")


def _int(value: int | str | bytes | None) -> int | None:
    """A stored limit: '' or absent means unlimited. Lua may have written a number
    as a double (``1e+15``, or ``1e+40`` from before caps were bounded): it is read
    exactly, so reading a ledger never fails on what a script could write."""
    if isinstance(value, int):
        return value
    text = _str(value)
    if not text:
        return None
    try:
        number = Decimal(text)
    except InvalidOperation:
        number = Decimal("nan")
    # A double is under 10^309; a longer number is nothing Lua wrote (nor worth expanding).
    if not number.is_finite() or number.adjusted() > 308 or number != number.to_integral_value():
        raise LedgerError(f"a ledger row holds {text!r} where a whole number belongs")
    return int(number)


def _deadline(value: str | bytes | None) -> datetime | None:
    text = _str(value)
    return datetime.fromisoformat(text) if text else None


def _fields(raw: dict) -> dict[str, str]:
    return {_str(k): _str(v) for k, v in raw.items()}


def agent_row(agent_id: str, raw: dict) -> AgentRow:
    """The row of ``agent_id`` from its hash, as ``HGETALL`` answers it."""
    f = _fields(raw)
    counts: dict[str, Any] = {k: int(f.get(k, 0)) for k in _COUNTS}
    limits: dict[str, Any] = {k: _int(f.get(k)) for k in _LIMITS}
    return AgentRow(
        agent_id=agent_id,
        depth=int(f["depth"]),
        depth_limit=int(f["depth_limit"]),
        deadline=_deadline(f.get("deadline")),
        agent_cycles_limit=_int(f.get("agent_cycles_limit")),
        tools=_tool_names(f.get("tools")),
        deny=json.loads(f.get("deny") or "[]"),
        scopes=json.loads(f["scopes"]) if f.get("scopes") else None,
        digest=f.get("digest") or None,
        spec=f.get("spec") or None,
        child_fraction=float(f["child_fraction"]) if f.get("child_fraction") else None,
        priority=_int(f.get("priority")),
        first_run=f.get("first_run") or None,
        first_run_until=float(f["first_run_until"]) if f.get("first_run_until") else None,
        ancestors=json.loads(f.get("ancestors") or "[]"),
        **counts,
        tokens_reserved=_reserved(f),
        **_costs(f),
        **limits,
    )


def _scope_row(name: str, raw: dict) -> ScopeRow:
    f = _fields(raw)
    return ScopeRow(
        name=name,
        tokens_limit=_int(f.get("tokens_limit")),
        cycles_limit=_int(f.get("cycles_limit")),
        tokens_per_minute=_int(f.get("tpm_limit")),
        requests_per_minute=_int(f.get("rpm_limit")),
        running_limit=_int(f.get("running_limit")),
        weight=int(f.get("weight", 1)),
        tokens_used=int(f.get("tokens_used", 0)),
        tokens_reserved=_reserved(f),
        cycles_used=int(f.get("cycles_used", 0)),
        **_costs(f),
    )


def _costs(f: dict[str, str]) -> dict[str, Any]:
    """A row's money in USD: it holds whole micro-dollars, cost_held (used plus held) like tokens_held."""
    used = int(f.get("cost_used", 0))
    return {
        "cost_used": usd(used),
        "cost_reserved": usd(int(f.get("cost_held", 0)) - used),
        "cost_limit": usd(_int(f.get("cost_limit"))),
    }


def _reserved(f: dict[str, str]) -> int:
    """A row holds tokens_held (used plus held for calls in flight): what is reserved is the difference."""
    return int(f.get("tokens_held", 0)) - int(f.get("tokens_used", 0))
