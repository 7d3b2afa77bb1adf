"""The ledger's interface: what the worker may ask of it and what it answers.

The ledger enforces budgets across every worker on every machine. Each agent has a
row whose used and reserved counts cover its whole subtree, so a reservation is
checked and applied on the agent, every ancestor and every global scope at once.
``RedisLedger`` (``covey.budgets.redis_ledger``) is the real backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, computed_field

from covey.budgets import scopes
from covey.budgets.budget import Budget
from covey.budgets.prices import Price
from covey.errors import CoveyError
from covey.redis_scripts import ScriptCall
from covey.status import Cause, CauseKind, Resource


class LedgerError(CoveyError):
    """A caller's bug (an agent used before it was opened, a settle on the wrong
    chain); never a budget refusal, which is an ``Opened``/``Grant`` with ok=False."""


@dataclass(frozen=True)
class AgentTerms:
    """What an agent may do besides spend, kept on its ledger row when it is opened,
    so the message that starts its task cannot widen it."""

    tools: list[str] | None = None  # tools it may be offered; None: every tool
    deny: list[str] = field(default_factory=list)
    max_cycles: int | None = None  # model calls of its own (not its subtree's)
    scopes: list[str] | None = None  # the global scopes its calls charge
    digest: str | None = None  # of the message that started the job (roots only)
    spec: str | None = None  # a child's spec, JSON: what its first step runs (its message carries only ids)
    child_fraction: float | None = None  # a child's: the share of its budget each of its own children asks for
    priority: int | None = None  # the job's (covey.config.priorities), which the agent's messages carry


@dataclass(frozen=True)
class FirstRun:
    """The delivery that would run a root's first step, and how long it may take. No
    other delivery of the job runs that step while it holds it: a second copy of a
    job's first message (a client resubmitting under the job's id, a duplicated
    publish) is the message its outbox expects, if any, as the first is, and would
    otherwise run beside the first.
    ``replaces`` names a holding delivery the broker no longer holds (its worker
    died and the message came back under a new tag): its hold goes to this one."""

    delivery: str = ""  # '' : none is held
    seconds: float = 0.0
    replaces: str = ""


@dataclass(frozen=True)
class Opened:
    """Answer to ``open``. ``budget`` holds the child's limits after clamping; a
    clamp may leave ``max_tokens`` or ``max_cycles`` at 0 (the child's first
    reserve is then refused). A refusal's ``cause`` names the ancestor whose cap
    was reached; ``reason`` says it to a person."""

    ok: bool
    budget: Budget | None
    reason: str | None
    cause: Cause | None = None


@dataclass(frozen=True)
class Pricing:
    """What a call's tokens cost, so its reservation holds money beside tokens."""

    model: str  # named in a refusal
    price: Price | None  # None: the model has no prices, and a row with a cost cap refuses the call
    prompt_tokens: int  # the prompt's share of the tokens wanted; the rest is the reply's

    def args(self) -> list[int | str]:
        """The reserve script's cost arguments: the prompt's worst cost, the reply's rate, the share, the name."""
        if self.price is None:
            return ["", "", self.prompt_tokens, self.model]
        return [self.price.prompt_cost(self.prompt_tokens), str(self.price.output), self.prompt_tokens, self.model]


@dataclass(frozen=True)
class Grant:
    """Answer to ``reserve``: the tokens the call may spend (the prompt and its
    ``max_tokens``) and the micro-dollars held for them, or a refusal whose ``cause``
    names the row that is short (``reason`` says it to a person)."""

    ok: bool
    tokens: int
    reason: str | None
    cause: Cause | None = None
    record: str | None = None  # the outcome stored when this reservation was settled before
    cost: int = 0  # micro-dollars held; 0 again for a reservation settled before (nothing is held)
    bound: Resource = Resource.TOKENS  # what held the grant to its tokens: a reply cut there was short of it

    @property
    def cancelled(self) -> bool:
        return self.cause is not None and self.cause.kind is CauseKind.CANCELLED

    @property
    def retry_after(self) -> float | None:
        """Seconds to wait before asking again: until a scope's full window of this minute
        gives way to the next, or for calls in flight to settle what they hold (None:
        granted, or refused for good)."""
        return self.cause.retry_after if self.cause is not None else None


@dataclass(frozen=True)
class Left:
    """What the tightest of an agent's rows (its own, its ancestors', its scopes') has
    left now, calls in flight held; None where no row caps it."""

    tokens: int | None = None
    cost: float | None = None  # USD
    cycles: int | None = None


class ScopeRow(BaseModel):
    name: str
    tokens_used: int = 0
    tokens_reserved: int = 0
    tokens_limit: int | None = None
    cost_used: float = 0.0  # USD, from the ledger's whole micro-dollars
    cost_reserved: float = 0.0
    cost_limit: float | None = None
    cycles_used: int = 0
    cycles_limit: int | None = None
    tokens_per_minute: int | None = None  # granted tokens per epoch minute, across jobs
    requests_per_minute: int | None = None
    running: int = 0  # agents holding a running slot now (``covey.budgets.running``)
    running_limit: int | None = None  # agents it lets run at once, across jobs
    waiting: int = 0  # agents queued for a running slot
    weight: int = 1  # a tenant's share of the capped scopes its agents wait for, against other tenants'

    @computed_field  # type: ignore[prop-decorator]
    @property
    def counted(self) -> bool:
        """Whether the ledger charges it: only a scope with a cap on what it spends is
        written (an uncapped ``global`` would be a key every call in the fleet writes),
        so an uncounted scope's usage reads 0 whatever its jobs spent."""
        caps = (self.tokens_limit, self.cost_limit, self.cycles_limit, self.tokens_per_minute, self.requests_per_minute)
        return any(cap is not None for cap in caps)


class AgentRow(BaseModel):
    """One agent's ledger row; used and reserved count its whole subtree."""

    agent_id: str
    depth: int
    depth_limit: int
    tokens_used: int = 0
    tokens_reserved: int = 0
    tokens_limit: int | None = None
    cost_used: float = 0.0  # USD
    cost_reserved: float = 0.0
    cost_limit: float | None = None
    cycles_used: int = 0  # a call in flight counts
    cycles_limit: int | None = None
    agents_spawned: int = 0
    agents_limit: int | None = None
    tool_calls_used: int = 0
    tool_calls_limit: int | None = None  # on the root's row only: it caps the whole job
    deadline: datetime | None = None
    agent_cycles_limit: int | None = None
    tools: list[str] | None = None
    deny: list[str] = []
    scopes: list[str] | None = None
    digest: str | None = None
    spec: str | None = None  # a child's spec, JSON, as its parent opened it
    child_fraction: float | None = None
    priority: int | None = None  # None: a row opened before rows kept it
    first_run: str | None = None  # the delivery that holds the root's first step (FirstRun) ...
    first_run_until: float | None = None  # ... until then (unix seconds)
    ancestors: list[str] = []  # root..parent, as opened: the rows its calls charge besides its own


# A row's spend against its caps: a snapshot's job-level numbers (the root's row).
# The rest of a row (a child's spec, its digest) is the worker's business.
TOTALS = frozenset(
    {
        "tokens_used",
        "tokens_reserved",
        "tokens_limit",
        "cost_used",
        "cost_reserved",
        "cost_limit",
        "cycles_used",
        "cycles_limit",
        "agents_spawned",
        "agents_limit",
        "tool_calls_used",
        "tool_calls_limit",
    }
)


class LedgerSnapshot(BaseModel):
    """A job's ledger at one moment. Job-level numbers are the root's row (its
    subtree is the job); an unknown job gives zeros and no agents."""

    job_id: str
    root_id: str | None = None
    tokens_used: int = 0
    tokens_reserved: int = 0
    tokens_limit: int | None = None
    cost_used: float = 0.0  # USD
    cost_reserved: float = 0.0
    cost_limit: float | None = None
    cycles_used: int = 0
    cycles_limit: int | None = None
    agents_spawned: int = 0
    agents_limit: int | None = None
    tool_calls_used: int = 0
    tool_calls_limit: int | None = None
    cancelled: bool = False
    agents: list[AgentRow] = []
    scopes: list[ScopeRow] = []


@dataclass(frozen=True)
class Settling:
    """A model call's settlement as a script call, to run in the round trip of
    another write (its agent's final record: one round trip less a one-call
    agent); ``charged`` reads its reply as ``Ledger.settle`` answers, raising as
    it does."""

    call: ScriptCall
    charged: Callable[[Any], bool]


@runtime_checkable
class Ledger(Protocol):
    """Every method is atomic and safe to call again: a redelivered task never
    charges twice. ``chain`` is agent ids root..agent (for ``open``: root..parent)."""

    def open_root(
        self,
        job_id: str,
        agent_id: str,
        budget: Budget,
        terms: AgentTerms | None = None,
        run: FirstRun | None = None,
        event: str = "",
    ) -> AgentRow | None:
        """Write the root's limits and terms; a no-op if the root is already open.
        Returns the root's row as it then stands (the earlier one, if it was open).
        ``run`` takes the root's first step for its delivery, unless another holds
        it (one ``run.replaces`` does not name): the row then names that one in ``first_run``.

        Each method that takes an ``event`` (a ``covey.events.JobEvent``'s JSON)
        appends it to the job's events in the script that writes what it reports,
        and only then: here, when the row is opened."""

    def open(
        self,
        job_id: str,
        chain: list[str],
        child_id: str,
        budget: Budget,
        terms: AgentTerms | None = None,
        event: str = "",
    ) -> Opened:
        """Charge one spawn to every ancestor and write the child's limits, clamped
        to what each ancestor has left, and its terms; refuse past max_agents or
        max_depth."""

    def open_many(
        self,
        job_id: str,
        chain: list[str],
        children: Sequence[tuple[str, Budget, AgentTerms]],
        events: Sequence[str] = (),
    ) -> list[Opened]:
        """``open`` for each (child id, budget, terms) of ``children``, in order, in one
        round trip: each is clamped to what the ones before it left, as if opened
        alone; the i-th of ``events`` is the i-th child's opening."""

    def agent(self, job_id: str, agent_id: str) -> AgentRow | None:
        """The agent's row as opened (None if it never was): what its task may trust."""

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
        """Hold up to ``tokens`` (at least ``min_tokens``) and one cycle on every
        agent in the chain and every scope with a cap, or refuse naming the row
        that is short. With ``pricing``, the worst cost of the tokens granted is
        held too, and a row's cost cap shrinks the reply to what it can pay for.
        A scope whose window of this minute is full answers ``retry_after``, and so does
        a row short only of what calls in flight hold (what is used leaves room).
        ``cycle`` (the agent's n-th call) is refused past the agent's own cycle cap.
        A cancelled job, or an agent of the chain its parent cancelled, is refused
        ``cancelled`` (``covey.budgets.cancels`` says which), before a replay too.
        A reservation settled before is granted again with the outcome stored then.
        ``event`` is written when a new reservation is granted, with its ``reserved`` tokens.
        ``keep`` tokens of the agent's own row stay out of this call's reach, and of
        its descendants' calls, until its next call: room for its wrap-up."""

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
        """Turn the reservation (tokens, and ``cost`` micro-dollars) into actual usage and keep ``record`` (the call's
        outcome) for a replay; False if it was already settled. It charges what
        the reserve held: the chain and the scopes with a cap."""

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
        """``settle``, made but not run: whoever runs it reads its reply with ``charged``."""

    def settled(self, settling: Settling) -> bool:
        """Run ``settling`` alone: ``settle``'s answer."""

    @property
    def settles_ride(self) -> bool:
        """Whether a ``Settling`` may ride another write's round trip: not when a
        ledger write counts only once replicas hold it (that takes the ledger's WAIT)."""

    def count_tool_call(self, job_id: str, chain: list[str], call_id: str, event: str = "") -> Grant:
        """Count one tool call (``call_id``, unique in the job) on every agent in the
        chain, or refuse past a ``max_tool_calls`` cap naming the agent whose row holds
        it. Counting is idempotent: a call counted before is granted again with the
        result ``record_tool_call`` kept for it, if its run finished."""

    def record_tool_call(self, job_id: str, agent_id: str, call_id: str, record: str, event: str = "") -> None:
        """Keep a finished tool call's result, so a redelivered step replays it; the
        first result kept stays."""

    def release_stale(self, now: float | None = None) -> int:
        """Give back reservations of any job that expired unsettled (a dead worker's)."""

    def snapshot(self, job_id: str) -> LedgerSnapshot: ...

    def set_scope(
        self,
        name: str,
        max_tokens: int | None,
        max_cycles: int | None,
        tokens_per_minute: int | None = None,
        requests_per_minute: int | None = None,
        max_cost: float | None = None,
    ) -> None:
        """Create a global scope or write its caps across jobs (``max_cost`` in USD); None removes that cap."""

    def left(self, job_id: str, chain: list[str], scopes: list[str]) -> Left:
        """What the chain's rows and the scopes have left now, the tightest of each (one read)."""

    def has_scope(self, name: str) -> bool:
        """Whether the scope was created (``set_scope``) or charged before."""

    def scope_rows(self) -> list[ScopeRow]: ...


def unknown_scope(ledger: Ledger, names: list[str]) -> str | None:
    """Why a job naming these scopes is refused, or None. Only created scopes
    carry counters, so no client can make the ledger grow keys for new names."""
    for name in names:
        if name != scopes.GLOBAL and not ledger.has_scope(name):
            return no_scope(name)
    return None


def no_scope(name: str) -> str:
    """Why a job naming scope ``name``, which was never created, is refused."""
    return (
        f"{scopes.kind(name)}: no ledger scope {name}; create it first with "
        f"`covey scope {name} --max-tokens N` (or --tokens-per-minute N)"
    )
