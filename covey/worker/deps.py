"""What the worker's loop reaches for, built once per worker process."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property, lru_cache
from pathlib import Path

from redis import Redis

from covey.budgets.cancels import Cancels
from covey.budgets.ledger import Ledger
from covey.budgets.redis_ledger import RedisLedger, ReplicaWait
from covey.budgets.running import RunningSlots
from covey.config import connections
from covey.config.settings import Settings, get_settings
from covey.models.llm import LLM
from covey.store.approvals import Approvals
from covey.store.checkpoints import Checkpoints
from covey.store.model_cache import ModelCache
from covey.store.outbox import Outbox
from covey.store.sessions import Sessions
from covey.store.tree import JobTree
from covey.store.workspace import Workspace
from covey.tools.mcp import config as mcp_config
from covey.tools.mcp.config import HttpServer
from covey.worker import redaction, signing, takeover
from covey.worker.snapshot import RedisStepRecords, StepRecords


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
    cancels: Cancels
    step_records: StepRecords
    approvals: Approvals
    sessions: Sessions
    cache: ModelCache
    now: Callable[[], datetime] = field(default=utcnow)
    # False once another worker took the running step's delivery (covey.worker.takeover).
    still_held: Callable[[], bool] = field(default=lambda: True)

    def workspace(self, job_id: str) -> Workspace:
        return Workspace(self.redis, job_id, self.settings.job_ttl)

    @cached_property
    def secret(self) -> bytes:
        """What signs and checks the messages between workers (``covey.worker.signing``)."""
        return signing.shared_secret(self.settings.secret, self.settings.broker)

    @property
    def secrets(self) -> list[str]:
        """Every secret this worker holds, so none is shown where people read (``covey.worker.redaction``)."""
        held = [self.settings.secret, self.settings.openai_api_key, self.secret.decode("utf-8", "replace")]
        return [s for s in [*held, *self.llm.catalog.api_keys(), *_mcp_header_values(self.settings.mcp)] if s]

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
            cancels=Cancels(client, settings.job_ttl),
            step_records=RedisStepRecords(client),
            approvals=Approvals(client, settings.job_ttl),
            sessions=Sessions(client, settings.session_ttl, settings.session_bytes),
            cache=ModelCache(client, settings.cache_ttl),
        )


def _mcp_header_values(path: Path | None) -> list[str]:
    """The values the MCP servers file's headers send (their variables', read here
    as the sessions read them), and each one's credential without its scheme
    (``Bearer``): a tool may echo either."""
    if path is None:
        return []
    try:
        servers = mcp_config.load(path)
    except mcp_config.McpFileError:  # refused at the worker's start: no header is sent from it
        return []
    values = [os.environ.get(v, "") for s in servers.values() if isinstance(s, HttpServer) for v in s.headers.values()]
    return [*values, *(v.split(None, 1)[1] for v in values if len(v.split(None, 1)) == 2)]


@lru_cache(maxsize=1)
def worker_deps() -> Deps:
    """Built lazily, so a prefork child makes its own connections after the fork;
    its secrets are masked wherever this process redacts from then on."""
    deps = Deps.from_settings(get_settings())
    redaction.hold(deps.secrets)
    return deps
