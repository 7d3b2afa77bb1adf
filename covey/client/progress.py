"""A running job at a glance: how many agents are done, running, waiting and queued,
what a waiting agent waits for (a scope's running cap or window), and what the
tree has spent against its caps. Pure: built from the tree's nodes and a ledger
snapshot, so the CLI's live line and ``JobHandle.watch`` agree."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from pydantic import BaseModel

from covey.budgets.ledger import LedgerSnapshot
from covey.status import AgentStatus, JobStatus
from covey.store.tree import Node


class Progress(BaseModel):
    job_id: str
    status: JobStatus  # the root's: queued until it starts
    done: int = 0  # agents that ended, whatever their status
    running: int = 0
    waiting: int = 0  # on their children, or for a scope (``waits``)
    queued: int = 0
    waits: list[str] = []  # what each agent waiting for a scope waits for: ``tenant:acme running cap 2/2, ~3 s``
    tokens_used: int = 0
    tokens_limit: int | None = None
    cycles_used: int = 0
    cycles_limit: int | None = None
    elapsed: float = 0.0  # seconds the watcher has watched

    @property
    def finished(self) -> bool:
        return self.status.final

    @classmethod
    def of(
        cls, job_id: str, nodes: list[Node], ledger: LedgerSnapshot, elapsed: float, now: datetime | None = None
    ) -> Progress:
        counts = Counter("done" if n.final else n.status for n in nodes)
        now = now or datetime.now(UTC)
        waits = [n.wait.said(now) for n in nodes if n.status is AgentStatus.WAITING and n.wait is not None]
        root = next((n for n in nodes if n.parent_id is None), None)
        return cls(
            job_id=job_id,
            status=JobStatus.of_root(root.status) if root else JobStatus.QUEUED,
            done=counts["done"],
            running=counts[AgentStatus.RUNNING],
            waiting=counts[AgentStatus.WAITING],
            queued=counts[AgentStatus.QUEUED],
            waits=waits,
            tokens_used=ledger.tokens_used,
            tokens_limit=ledger.tokens_limit,
            cycles_used=ledger.cycles_used,
            cycles_limit=ledger.cycles_limit,
            elapsed=elapsed,
        )

    def line(self) -> str:
        """``3 done, 2 running, 1 waiting, 5 queued | tokens 1234/200000 | cycles 12/200 started | 3.2s``, with
        ``| waiting: tenant:acme running cap 2/2, ~3 s`` after the counts while an agent waits for a scope."""
        agents = f"{self.done} done, {self.running} running, {self.waiting} waiting, {self.queued} queued"
        tokens = f"tokens {self.tokens_used}/{_cap(self.tokens_limit)}"
        # The ledger counts a model call as it is reserved; a node, once its agent steps on.
        cycles = f"cycles {self.cycles_used}/{_cap(self.cycles_limit)} started"
        parts = [agents, *([waiting(self.waits)] if self.waits else []), tokens, cycles, f"{self.elapsed:.1f}s"]
        return " | ".join(parts)


def _cap(limit: int | None) -> str:
    return "∞" if limit is None else str(limit)


def waiting(waits: list[str]) -> str:
    """``waiting: tenant:acme running cap 2/2, ~3 s (and 4 more)``: the first wait, and how many more."""
    more = f" (and {len(waits) - 1} more)" if len(waits) > 1 else ""
    return f"waiting: {waits[0]}{more}"
