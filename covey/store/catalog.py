"""The workers' catalog: what each live worker serves, published in Redis with a heartbeat.

Which tools and models exist is not the client's to know: a worker's are its own
configuration (``COVEY_TOOLS``, ``COVEY_MCP``, ``COVEY_MODELS``, the strategies
its install registers). Each worker publishes an entry (its queues, its tools by
name with a digest of their schema, its models, its strategies with the JSON
schema of their options) that lapses ``ttl`` seconds after its last heartbeat, so the catalog
is what live workers serve now. A client and a sweep check a spec against it
when a worker on their queue publishes one, and a worker checks the spec it
runs against the workers on the queue the job came from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from importlib.resources import files
from typing import Any

import redis
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field

from covey import keys, wire
from covey.errors import CoveyError

_PUBLISH = (files("covey.store") / "lua" / "publish.lua").read_text(encoding="utf-8")
ANY_MODEL = "*"  # a served model row standing for any name (a worker's default endpoint)


class ServedTool(BaseModel):
    """A tool as the catalog lists it: ``digest`` tells two workers' schemas of one name apart."""

    model_config = ConfigDict(frozen=True)

    name: str
    origin: str
    description: str
    digest: str


class ServedStrategy(BaseModel):
    """A strategy as the catalog lists it: its options' JSON schema checks a spec's
    options where the strategy itself is not installed."""

    model_config = ConfigDict(frozen=True)

    name: str
    options: dict[str, Any]


class WorkerEntry(BaseModel):
    """What one worker serves. ``models`` are the rows ``covey models`` prints
    (``covey.models.catalog.ServedModel`` as JSON), their secrets already redacted."""

    worker: str  # the Celery node name
    queues: list[str]
    tools: list[ServedTool]
    models: list[dict[str, Any]]
    # Its broker visibility timeout: it gives back any delivery left unacknowledged
    # that long. None in an entry of a covey before it was published.
    redelivery_seconds: float | None = None
    guardrails: list[str] = Field(default_factory=list)  # their names
    strategies: list[ServedStrategy] = Field(default_factory=list)  # empty in an entry of an older covey

    def model_names(self) -> set[str]:
        return {row["name"] for row in self.models}


class NoWorkerServes(CoveyError, ValueError):
    """Names no worker on a queue serves: the message names them and lists what is served."""


class WorkerCatalog:
    """Entries under ``keys.catalog_entry``, indexed by ``keys.catalog_workers``."""

    def __init__(self, client: redis.Redis, ttl: float) -> None:
        self._redis, self._ttl_ms = client, max(1, round(ttl * 1000))
        self._publish = client.register_script(_PUBLISH)

    def publish(self, entry: WorkerEntry) -> None:
        """Write (or refresh) ``entry`` for another ``ttl``, and drop from the index
        the workers whose entries lapsed."""
        index = keys.catalog_workers()
        self._publish(
            keys=[keys.catalog_entry(entry.worker), index], args=[entry.worker, entry.model_dump_json(), self._ttl_ms]
        )
        workers = sorted(self._redis.smembers(index))
        gone = [w for w, raw in zip(workers, self._redis.mget([keys.catalog_entry(w) for w in workers])) if raw is None]
        if gone:
            self._redis.srem(index, *gone)

    def withdraw(self, worker: str) -> None:
        """Remove a worker's entry at once: it is stopping."""
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(keys.catalog_entry(worker))
            pipe.srem(keys.catalog_workers(), worker)
            pipe.execute()

    def entries(self, queue: str | None = None) -> list[WorkerEntry]:
        """The live workers' entries (those consuming ``queue``, when given), by worker name.
        An entry that does not parse (another version's) is skipped."""
        workers = sorted(self._redis.smembers(keys.catalog_workers()))
        if not workers:
            return []
        found = []
        for raw in self._redis.mget([keys.catalog_entry(w) for w in workers]):
            if raw is None:
                continue
            try:
                entry = WorkerEntry.model_validate(json.loads(raw))
            except ValueError:
                continue
            if queue is None or queue in entry.queues:
                found.append(entry)
        return found


class ListedTool(ServedTool):
    """One row of ``covey tools``: a tool as served, and which workers (on which queues) serve it."""

    workers: list[str]
    queues: list[str]


def listed_tools(entries: list[WorkerEntry]) -> list[ListedTool]:
    """A row per tool as served, by name: two workers whose tool of one name differs
    (another origin, description or schema) give two rows, so the difference shows."""
    rows: dict[ServedTool, list[WorkerEntry]] = {}
    for entry in entries:
        for tool in entry.tools:
            rows.setdefault(tool, []).append(entry)
    return [
        ListedTool(**tool.model_dump(), workers=[e.worker for e in serving], queues=_queues(serving))
        for tool, serving in sorted(rows.items(), key=lambda item: (item[0].name, item[0].origin, item[0].digest))
    ]


def listed_models(entries: list[WorkerEntry]) -> list[dict[str, Any]]:
    """A row per model as served (the workers' rows, equal ones merged), each with the
    ``workers`` serving it, by name."""
    rows: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for entry in entries:
        for model in entry.models:
            rows.setdefault(json.dumps(model, sort_keys=True), (model, []))[1].append(entry.worker)
    return [{**model, "workers": workers} for model, workers in sorted(rows.values(), key=lambda r: r[0]["name"])]


def _queues(entries: list[WorkerEntry]) -> list[str]:
    return list(dict.fromkeys(q for entry in entries for q in entry.queues))


def check_workers_serve(
    entries: list[WorkerEntry],
    tools: Iterable[str],
    queue: str,
    model: str | None = None,
    guardrails: Iterable[str] = (),
) -> None:
    """``NoWorkerServes`` naming each of ``tools`` (or ``guardrails``) that no entry
    serves, or ``model`` when none serves it, listing what they do serve and the
    closest name. No entries: nothing is known, so nothing is refused."""
    if not entries:
        return
    guarded = sorted({name for entry in entries for name in entry.guardrails})
    unguarded = [name for name in dict.fromkeys(guardrails) if name not in guarded]
    if unguarded:
        raise NoWorkerServes(
            f"guardrail {unguarded[0]!r} is served by no worker on queue {queue!r}; served: "
            f"{', '.join(guarded) or 'none'}" + closest(unguarded[0], guarded)
        )
    served = sorted({tool.name for entry in entries for tool in entry.tools})
    missing = [name for name in dict.fromkeys(tools) if not any(wire.matches(s, [name]) for s in served)]
    if missing:
        named = ", ".join(repr(name) for name in missing)
        raise NoWorkerServes(
            f"{'tool' if len(missing) == 1 else 'tools'} {named} {'is' if len(missing) == 1 else 'are'} "
            f"served by no worker on queue {queue!r}; served: {', '.join(served) or 'none'}"
            + closest(missing[0], served)
        )
    if model is not None and not serves_model(entries, model):
        known = sorted({name for entry in entries for name in entry.model_names()})
        raise NoWorkerServes(
            f"model {model!r} is served by no worker on queue {queue!r}; served: {', '.join(known)}"
            + closest(model, known)
        )


def check_strategy(entries: list[WorkerEntry], name: str, options: dict[str, Any], queue: str) -> bool:
    """Whether the workers' entries list strategies at all (False: nothing is known);
    ``NoWorkerServes`` when none on the queue serves ``name``, naming those served
    and the closest, or when ``options`` fail its published schema, naming the field."""
    published = [s for entry in entries for s in entry.strategies]
    if not published:
        return False
    found = next((s for s in published if s.name == name), None)
    if found is None:
        served = sorted({s.name for s in published})
        raise NoWorkerServes(
            f"strategy {name!r} is served by no worker on queue {queue!r}; served: {', '.join(served)}"
            + closest(name, served)
        )
    problem = next(iter(sorted(Draft202012Validator(found.options).iter_errors(options), key=str)), None)
    if problem is not None:
        where = ".".join(str(p) for p in problem.absolute_path)
        raise NoWorkerServes(f"options{'.' + where if where else ''}: {problem.message} (strategy {name!r})")
    return True


def closest(name: str, known: Iterable[str]) -> str:
    """``; did you mean 'sim'?`` for the known name nearest ``name``, or nothing."""
    near = wire.nearest(name, known)
    return f"; did you mean {near!r}?" if near else ""


def serves_model(entries: list[WorkerEntry], name: str) -> bool:
    """Whether some entry serves model ``name``, by name or through a default endpoint."""
    return any(name in entry.model_names() or ANY_MODEL in entry.model_names() for entry in entries)
