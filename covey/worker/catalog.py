"""This worker's entry in the workers' catalog (``covey.store.catalog``), kept fresh by a heartbeat.

One entry per Celery node, published by a thread of the node's main process: the
node is what consumes queues, and whatever its pool (threads or greenlets in that
process, prefork children forked from it with the same configuration) its slots
serve the same tools and models. A node killed without a word drops out once its
entry's TTL (``COVEY_CATALOG_TTL``) lapses; one stopped cleanly withdraws it at once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable
from functools import cache
from typing import Any

import redis
from celery.signals import worker_ready, worker_shutdown

from covey.config import connections
from covey.config.settings import Settings, get_settings
from covey.models.catalog import Catalog, ServedModel
from covey.models.dialect import DIALECTS
from covey.orchestration import registry as strategies
from covey.store.catalog import ServedStrategy, ServedTool, WorkerCatalog, WorkerEntry, check_workers_serve
from covey.tools import guardrails, registry
from covey.tools.tool import Tool
from covey.worker.redaction import redact

log = logging.getLogger(__name__)

DIGEST_CHARS = 16  # of a schema's SHA-256: enough to tell two workers' schemas apart
BEATS_PER_TTL = 3  # an entry outlives two missed heartbeats


def digest(schema: dict[str, Any]) -> str:
    """A digest of a tool's function schema, the same for equal schemas whatever their key order."""
    canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:DIGEST_CHARS]


def served_tool(tool: Tool) -> ServedTool:
    return ServedTool(name=tool.name, origin=tool.origin, description=tool.description, digest=digest(tool.schema()))


def redacted(rows: list[ServedModel]) -> list[ServedModel]:
    """The rows with no secret: an endpoint's URL may carry a password, a param a key."""
    return [
        row.model_copy(
            update={
                "endpoint": redact(row.endpoint),
                "params": {k: redact(v) if isinstance(v, str) else v for k, v in row.params.items()},
            }
        )
        for row in rows
    ]


def entry(
    worker: str,
    queues: list[str],
    tools: list[Tool],
    models: list[ServedModel],
    redelivery_seconds: float | None = None,
) -> WorkerEntry:
    """What ``worker`` serves (its guardrails as this process holds them), as the
    catalog holds it, and its visibility timeout."""
    return WorkerEntry(
        worker=worker,
        queues=queues,
        tools=[served_tool(tool) for tool in tools],
        models=[row.model_dump(mode="json") for row in redacted(models)],
        redelivery_seconds=redelivery_seconds,
        guardrails=[g.name for g in guardrails.served()],
        strategies=served_strategies(),
    )


@cache  # what an install registers is fixed for the process's life
def served_strategies() -> list[ServedStrategy]:
    """Every strategy this worker's install registers that loads, with its options' schema."""
    found = []
    for name in strategies.names():
        try:
            options = strategies.strategy(name).Options.model_json_schema()
        except strategies.UnknownStrategy as e:  # a plugin without its five names: the worker refuses it too
            log.warning("catalog: %s", e)
            continue
        found.append(ServedStrategy(name=name, options=options))
    return found


def served_tools() -> list[Tool]:
    """The tools this worker process serves, as its registry holds them."""
    return registry.served()


class Heartbeat:
    """Publishes ``entry_of()`` every ``period`` seconds, and at once when told what it
    serves changed (``now``), until stopped; then withdraws it."""

    def __init__(self, catalog: WorkerCatalog, worker: str, entry_of: Callable[[], WorkerEntry], period: float):
        self._catalog, self._worker, self._entry_of, self._period = catalog, worker, entry_of, period
        self._stopped = False
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="covey-catalog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def now(self) -> None:
        """Publish again at once: an MCP server's tools changed, and a job may name them."""
        self._wake.set()

    def _beat(self) -> None:
        while not self._stopped:
            try:
                self._catalog.publish(self._entry_of())
            except Exception as e:  # Redis away: the entry may lapse meanwhile, and comes back with it
                log.warning("catalog: heartbeat of %s failed (%s); next in %.3gs", self._worker, e, self._period)
            self._wake.wait(self._period)
            self._wake.clear()

    def stop(self) -> None:
        """Stop beating and withdraw the entry, so no one counts on a worker that is gone."""
        self._stopped = True
        self._wake.set()
        self._thread.join(timeout=connections.SOCKET_TIMEOUT_SECONDS)
        try:
            self._catalog.withdraw(self._worker)
        except Exception as e:  # it lapses by its TTL instead
            log.warning("catalog: could not withdraw %s (%s)", self._worker, e)


def heartbeat(settings: Settings, worker: str, queues: list[str], tools: Callable[[], list[Tool]]) -> Heartbeat:
    """A heartbeat for ``worker`` on its own connection: the tools are asked for at
    each beat (a tool that became unavailable drops out), and the dialect each model
    is spoken in (one its endpoint refused is dropped)."""
    client = connections.client(
        settings.redis_url,
        settings.redis_master,
        decode_responses=True,
        socket_timeout=connections.SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=connections.CONNECT_TIMEOUT_SECONDS,
    )
    catalog = Catalog.from_settings(settings)
    return Heartbeat(
        WorkerCatalog(client, settings.catalog_ttl),
        worker,
        lambda: entry(worker, queues, tools(), catalog.served(DIALECTS), settings.redelivery_seconds),
        settings.catalog_ttl / BEATS_PER_TTL,
    )


_running: list[Heartbeat] = []


@worker_ready.connect
def _start(sender: Any = None, **_: Any) -> None:
    """``sender`` is the node's consumer: its name and the queues it reads."""
    beat = heartbeat(get_settings(), sender.hostname, list(sender.app.amqp.queues.consume_from), served_tools)
    beat.start()
    registry.on_change(beat.now)
    _running.append(beat)


@worker_shutdown.connect
def _stop(**_: Any) -> None:
    while _running:
        _running.pop().stop()


def check_tools(client: redis.Redis, settings: Settings, tools: list[str] | None, queue: str) -> None:
    """``NoWorkerServes`` naming each of ``tools`` that no live worker on ``queue`` serves.
    None (every tool) names none; with no worker publishing, nothing is known to refuse."""
    if tools:
        check_workers_serve(WorkerCatalog(client, settings.catalog_ttl).entries(queue), tools, queue)
