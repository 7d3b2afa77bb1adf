"""What the worker's loop reaches for, built once per worker process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property, lru_cache

from redis import Redis

from covey.budgets.ledger import Ledger
from covey.budgets.redis_ledger import RedisLedger, ReplicaWait
from covey.budgets.running import RunningSlots
from covey.config import connections
from covey.config.settings import Settings, get_settings
from covey.models.llm import LLM
from covey.store.checkpoints import Checkpoints
from covey.store.outbox import Outbox
from covey.store.tree import JobTree
from covey.store.workspace import Workspace
from covey.worker import signing, takeover


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Deps:
    settings: Settings
    redis: Redis
    ledger: Ledger
    llm: LLM
    tree: JobTree
    checkpoints: Checkpoints
    outbox: Outbox
    slots: RunningSlots
    now: Callable[[], datetime] = field(default=utcnow)
    # Raises when another worker took the running step's delivery (covey.worker.takeover).
    still_held: Callable[[], None] = field(default=lambda: None)

    def workspace(self, job_id: str) -> Workspace:
        return Workspace(self.redis, job_id, self.settings.job_ttl)

    @cached_property
    def secret(self) -> bytes:
        """What signs and checks the messages between workers (``covey.worker.signing``)."""
        return signing.shared_secret(self.settings.secret, self.settings.broker)

    @classmethod
    def from_settings(cls, settings: Settings) -> Deps:
        client = connections.patient_client(
            settings.redis_url, settings.worker_slots, settings.redis_outage_seconds, settings.redis_master
        )
        replicas = ReplicaWait(settings.ledger_wait_replicas, settings.redis_outage_seconds)
        return cls(
            settings=settings,
            redis=client,
            ledger=RedisLedger(client, settings.job_ttl, replicas=replicas),
            llm=LLM(settings),
            tree=JobTree(client, settings.job_ttl),
            checkpoints=Checkpoints(client, settings.job_ttl),
            outbox=Outbox(client),
            still_held=takeover.still_held,
            slots=RunningSlots(client),
        )


@lru_cache(maxsize=1)
def worker_deps() -> Deps:
    """Built lazily, so a prefork child makes its own connections after the fork."""
    return Deps.from_settings(get_settings())
