"""``run_sweep``: every sample x configuration x repeat as a covey job, under one cap.

The submitter keeps at most ``max_in_flight`` jobs enqueued (the window; see
``window.py``), polls their results in one Redis round trip per tick (no
result subscription per job), and appends each outcome to ``DIR/results.jsonl``
as it arrives. Units are interleaved across configurations, so a sweep cut short
by its cap has compared them on the same samples.

Every job charges the ledger scope ``sweep:<id>``. A job refused by that scope
while others hold reservations on it is put back and the window shut to one;
refused when it was asked with nothing else in flight, the scope is dry: that
unit and every one not yet run are recorded ``skipped_budget``.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from celery.utils import uuid

from covey import keys
from covey.client import Client
from covey.config.settings import Settings, get_settings
from covey.results import AgentResult
from covey.spec import JobSpec
from covey.status import AgentStatus, CauseKind
from covey.sweeps.claims import Claims, Mark
from covey.sweeps.dataset import Sample, digest, load_dataset
from covey.sweeps.grid import Config, Grid, load_grid
from covey.sweeps.manifest import Manifest
from covey.sweeps.progress import SweepProgress
from covey.sweeps.records import REFUSED, SKIPPED_BUDGET, Record, RecordUsage, ResultsLog
from covey.sweeps.scorers import Scoring, mark, score_failed
from covey.sweeps.selection import Selection
from covey.sweeps.served import check_models, check_strategies
from covey.sweeps.window import Window

POLL_SECONDS = 0.05  # between two looks at the in-flight results
RENEW_SECONDS = 1.0  # lease renewal; well inside keys.SWEEP_OWNER_TTL_SECONDS
BUSY_RECHECK_SECONDS = 1.0  # how soon a unit another submitter holds is looked at again
RETRYABLE = frozenset({AgentStatus.FAILED.value, AgentStatus.TIMED_OUT.value, REFUSED})


@dataclass
class Unit:
    sample: Sample
    config: Config
    repeat: int
    attempt: int = 1

    @property
    def key(self) -> str:
        return unit_key(self.config, self.repeat, self.sample.id)


def unit_key(config: Config, repeat: int, sample_id: str) -> str:
    return f"{config.key}/{repeat}/{sample_id}"


@dataclass
class Flight:
    unit: Unit
    job_id: str
    sent: float  # monotonic seconds
    judging: Record | None = None  # set while this flight is the unit's judge job


@dataclass
class SweepOutcome:
    sweep_id: str
    directory: Path
    total: int
    already_done: int  # kept from an earlier run
    submitted: int  # jobs this run enqueued (judges included)
    adopted: int  # jobs of a dead submitter this run followed to their end
    peak_in_flight: int
    window_low: int
    dry: bool  # the sweep's cap ran out
    progress: SweepProgress | None = None
    timed_out: bool = False  # ``timeout`` ran out with units unrecorded; a rerun resumes them
    still_running: list[str] = field(default_factory=list)  # the jobs in flight at the end, oldest first
    cancelled: bool = False  # ``covey sweep-cancel`` stopped it; a rerun resumes the units not run


@dataclass
class _Run:
    """The mutable state of one run; the functions below advance it."""

    client: Client
    manifest: Manifest
    scoring: Scoring
    log: ResultsLog
    claims: Claims
    window: Window
    retries: int
    pending: Iterator[Unit]
    total: int
    already_done: int
    again: deque[Unit] = field(default_factory=deque)  # units to run before the fresh ones
    busy: deque[tuple[float, Unit]] = field(default_factory=deque)
    flights: dict[str, Flight] = field(default_factory=dict)
    ended: list[Record] = field(default_factory=list)  # this poll's records, written together
    marks: list[Mark] = field(default_factory=list)  # and their claims' marks, sent together once written
    done: int = 0
    failed: int = 0  # units, not attempts: one that fails then completes on a retry is done only
    scored: int = 0  # units kept or failed for good, before this run or in it, and the sum of their scores
    score_sum: float = 0.0
    skipped: int = 0
    tokens: int = 0
    submitted: int = 0
    adopted: int = 0
    peak: int = 0
    dry: bool = False
    refused_alone: set[str] = field(default_factory=set)  # units asked again once nothing else was in flight
    checked: set[tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=set)  # scopes and tools (_send)
    cancelled: bool = False
    started: float = field(default_factory=time.monotonic)

    def progress(self) -> SweepProgress:
        elapsed = time.monotonic() - self.started
        finished = self.done - self.already_done + self.skipped
        return SweepProgress(
            total=self.total,
            done=self.done,
            failed=self.failed,
            skipped=self.skipped,
            in_flight=len(self.flights),
            window=self.window.size,
            tokens=self.tokens,
            elapsed=elapsed,
            rate=finished / elapsed if elapsed > 0 else 0.0,
            accuracy=self.score_sum / self.scored if self.scored else None,
        )

    def count(self, record: Record) -> None:
        """Count a unit that ended for good into the live accuracy (a failed one scores 0)."""
        self.scored += 1
        self.score_sum += record.score or 0.0


def run_sweep(
    dataset: str | Path | list[Sample],
    grid: str | Path | Grid,
    out: str | Path,
    *,
    settings: Settings | None = None,
    max_in_flight: int = 16,
    retries: int = 0,
    max_tokens_total: int | None = None,
    max_cycles_total: int | None = None,
    max_cost_total: float | None = None,
    queue: str | None = None,
    observer: Callable[[SweepProgress], None] | None = None,
    timeout: float | None = None,
    selection: Selection | None = None,
    epochs: int | None = None,
) -> SweepOutcome:
    """Run (or resume) the sweep in ``out``; returns when every unit is recorded.

    Inputs are checked in full before the first job (``SweepInputError``). A
    rerun with the same ``out`` skips what a rerun keeps (``records.KEPT``), runs
    the rest again with ``retries`` more attempts each, and follows the jobs a
    killed submitter left running instead of running their samples again.
    ``selection`` narrows this run to some samples. Once the sweep is cancelled
    (``Claims.cancel``) it sends no more jobs and returns when those in flight have
    ended (``cancelled``); a rerun goes on with the units not run. ``SweepMismatch`` when
    ``out`` holds a sweep of another dataset or grid. Past ``timeout`` seconds
    it stops waiting (``timed_out``): the jobs in flight go on, and a rerun
    follows them. ``epochs``: how many times each sample runs, over the grid's ``repeats``.
    """
    if retries < 0:
        raise ValueError(f"retries cannot be negative, got {retries}")
    settings = settings or get_settings()
    every = dataset if isinstance(dataset, list) else load_dataset(dataset)
    dataset_name = "samples" if isinstance(dataset, list) else Path(dataset).name
    samples = (selection or Selection()).apply(every, dataset_name)
    grid_name = "grid" if isinstance(grid, Grid) else Path(grid).name
    grid_path = "grid" if isinstance(grid, Grid) else str(grid)
    grid = (grid if isinstance(grid, Grid) else load_grid(grid)).repeated(epochs)
    client = Client(settings.model_copy(update={"queue": queue or settings.sweep_queue}))
    published = client.catalog.entries(client.settings.queue)
    check_models(grid, settings, grid_name, client.settings.queue, published, priced=max_cost_total is not None)
    check_strategies(grid, grid_name, client.settings.queue, published)
    scoring = Scoring.build(grid.scorers)
    out = Path(out)
    manifest = Manifest.open(
        out,
        "samples" if isinstance(dataset, list) else str(dataset),
        grid_path,
        max_tokens_total,
        max_cycles_total,
        max_cost_total=max_cost_total,
        dataset_digest=digest(every),
        grid_digest=grid.digest,
        grid_run=grid.as_run(),
    )
    client.redis.ping()
    client.ledger.set_scope(
        manifest.scope, manifest.max_tokens_total, manifest.max_cycles_total, max_cost=manifest.max_cost_total
    )
    log = ResultsLog(out)
    latest = log.latest()
    kept = {unit for unit, record in latest.items() if record.kept}
    units = [Unit(s, c, r) for s in samples for c in grid.configs for r in range(grid.repeats)]
    run = _Run(
        client=client,
        manifest=manifest,
        scoring=scoring,
        log=log,
        claims=Claims(client.redis, manifest.id, client.settings.job_ttl),
        window=Window(max_in_flight),
        retries=retries,
        pending=(u for u in units if u.key not in kept),
        total=len(units),
        already_done=sum(1 for u in units if u.key in kept),
    )
    run.done = run.already_done
    for unit in units:
        if unit.key in kept:
            run.count(latest[unit.key])
    del units, latest
    run.claims.resume()
    run.claims.renew()
    renewed = time.monotonic()
    timed_out = False
    try:
        while True:
            if time.monotonic() - renewed >= RENEW_SECONDS:
                run.claims.renew()
                renewed = time.monotonic()
                _check_cancelled(run)
            _check_dry(run)
            moved = _fill(run)
            moved |= _collect(run)
            if observer is not None:
                observer(run.progress())
            if not run.flights and (run.cancelled or (not run.busy and not _has_pending(run))):
                break
            if timeout is not None and time.monotonic() - run.started >= timeout:
                timed_out = True
                break
            if not moved:
                time.sleep(POLL_SECONDS)
    finally:
        run.claims.release()
        log.close()
        client.close()
    return SweepOutcome(
        sweep_id=manifest.id,
        directory=out,
        total=run.total,
        already_done=run.already_done,
        submitted=run.submitted,
        adopted=run.adopted,
        peak_in_flight=run.peak,
        window_low=run.window.low,
        dry=run.dry,
        progress=run.progress(),
        timed_out=timed_out,
        cancelled=run.cancelled,
        still_running=[f.job_id for f in sorted(run.flights.values(), key=lambda f: f.sent)],
    )


def _has_pending(run: _Run) -> bool:
    if run.again:
        return True
    nxt = next(run.pending, None)
    if nxt is None:
        return False
    run.again.append(nxt)
    return True


def _next_unit(run: _Run) -> Unit | None:
    if run.busy and run.busy[0][0] <= time.monotonic():
        return run.busy.popleft()[1]
    if run.again:
        return run.again.popleft()
    return next(run.pending, None)


def _fill(run: _Run) -> bool:
    """Submit (or adopt) units until the window is full; True if any was. The units
    of one fill are claimed in one round trip, and their jobs recorded in another."""
    moved = False
    while len(run.flights) < run.window.size and not run.cancelled:
        if run.dry:
            _skip_rest(run)
            return moved
        units = _next_units(run, run.window.size - len(run.flights))
        if not units:
            return moved
        sends: list[tuple[Unit, str]] = []
        for unit, take in zip(units, run.claims.take_all([(u.key, uuid()) for u in units])):
            if take.outcome == "busy":
                run.busy.append((time.monotonic() + BUSY_RECHECK_SECONDS, unit))
                continue
            moved = True
            if take.outcome == "done":
                run.done += 1
            elif take.outcome == "adopt" and take.job_id and run.client.redis.exists(keys.submitted(take.job_id)):
                run.adopted += 1
                _fly(run, Flight(unit, take.job_id, time.monotonic()))
            elif take.job_id:  # ours; or adopted from a submitter killed before it sent the job: send it now
                sends.append((unit, take.job_id))
        now = datetime.now(UTC)
        _send(run, [(job_id, unit.config.spec(unit.sample, run.manifest.id, now)) for unit, job_id in sends])
        sent = time.monotonic()
        for unit, job_id in sends:
            _fly(run, Flight(unit, job_id, sent))
    return moved


def _next_units(run: _Run, n: int) -> list[Unit]:
    units: list[Unit] = []
    while len(units) < n and (unit := _next_unit(run)) is not None:
        units.append(unit)
    return units


def _fly(run: _Run, flight: Flight) -> None:
    run.flights[flight.job_id] = flight
    run.peak = max(run.peak, len(run.flights))


def _send(run: _Run, jobs: list[tuple[str, JobSpec]]) -> None:
    """Submit under the job ids chosen first, so a claim names its job before it
    exists; without a result subscription: ``_collect`` polls every result at once.
    The scopes and tools the jobs name are checked on the first job naming them only."""
    for _, spec in jobs:
        needs = (tuple(spec.scopes()), tuple(spec.tools or ()))
        if needs not in run.checked:
            run.client.check(spec)
            run.checked.add(needs)
    if jobs:
        run.client.send(jobs, subscribe=False)
        run.submitted += len(jobs)


def _collect(run: _Run) -> bool:
    """Record every in-flight job that has ended; True if any had."""
    if not run.flights:
        return False
    ids = list(run.flights)
    backend = run.client.app.backend
    raws = backend.mget([backend.get_key_for_task(i) for i in ids])
    moved = False
    for job_id, raw in zip(ids, raws):
        if raw is None:
            continue
        meta = backend.decode_result(raw)
        if meta.get("status") not in ("SUCCESS", "FAILURE"):
            continue
        moved = True
        flight = run.flights.pop(job_id)
        if flight.judging is not None:
            _judged(run, flight, _result(job_id, meta))
        else:
            _ended(run, flight, _result(job_id, meta))
    _write(run)
    return moved


def _write(run: _Run) -> None:
    """This poll's records to ``results.jsonl``, then their claims' marks: a claim
    marked kept is a unit no rerun runs, so its line is on disk first."""
    if run.ended:
        run.log.append(*run.ended)
    run.claims.record(*run.marks)
    run.ended.clear()
    run.marks.clear()


def _result(job_id: str, meta: dict[str, Any]) -> AgentResult | str:
    """The job's root result, or why the worker refused it."""
    if meta["status"] == "SUCCESS":
        return AgentResult.model_validate(meta["result"])
    exc = meta.get("result") or {}
    message = exc.get("exc_message") if isinstance(exc, dict) else exc
    if isinstance(message, (list, tuple)):
        message = " ".join(str(m) for m in message)
    return str(message or "refused by the worker")


def _ended(run: _Run, flight: Flight, result: AgentResult | str) -> None:
    unit = flight.unit
    if isinstance(result, str):
        _finish(run, flight, _record(unit, flight, REFUSED, error=result))
        return
    if _sweep_refused(run, result):
        others = bool(run.flights) or run.window.size > 1  # others hold reservations on the scope
        # Nothing in flight now is not nothing in flight at the refusal: it may have met the
        # reservations of flights that ended since, settled for less. The unit is asked once
        # more on its own; refused then, the scope is dry.
        if others or unit.key not in run.refused_alone:
            if not others:
                run.refused_alone.add(unit.key)
            run.window.budget_pressed()
            run.marks.append((unit.key, flight.job_id, SKIPPED_BUDGET))
            run.tokens += result.usage.total_tokens
            run.again.appendleft(unit)
            return
        run.dry = True
        _finish(run, flight, _record(unit, flight, SKIPPED_BUDGET, result=result))
        return
    if result.cause is not None and result.cause.kind is CauseKind.RATE_LIMITED:
        run.window.rate_limited()
    elif result.ok:
        run.window.succeeded()
    record = _record(unit, flight, result.status.value, result=result)
    if result.ok:
        for scorer in run.scoring.local:
            mark(scorer, record, unit.sample)
        record.score = record.scores.get(run.scoring.primary)
    judge = run.scoring.judge
    if result.ok and judge is not None and not run.cancelled:
        judge_id = uuid()
        _send(run, [(judge_id, judge.spec(unit.sample, result.output or "", run.manifest.id))])
        record.judge_job_id = judge_id
        _fly(run, Flight(unit, judge_id, time.monotonic(), judging=record))
        return
    _finish(run, flight, record)


def _judged(run: _Run, flight: Flight, result: AgentResult | str) -> None:
    record = flight.judging
    assert record is not None
    judge = run.scoring.judge
    assert judge is not None
    if isinstance(result, str):
        score_failed(record, judge.name, f"judge refused: {result}")
    else:
        record.judge_tokens = result.usage.total_tokens
        run.tokens += record.judge_tokens
        try:
            record.scores[judge.name] = judge.verdict(result)
        except ValueError as e:
            score_failed(record, judge.name, str(e))
    record.score = record.scores.get(run.scoring.primary)
    _finish(run, Flight(flight.unit, record.job_id or flight.job_id, flight.sent), record)


def _record(
    unit: Unit, flight: Flight, status: str, result: AgentResult | None = None, error: str | None = None
) -> Record:
    usage = RecordUsage()
    latency = time.monotonic() - flight.sent
    if result is not None:
        usage = RecordUsage(**result.usage.model_dump())
        error = result.error
        if result.started_at and result.finished_at:  # the job's own run time, whoever waited on it
            latency = (result.finished_at - result.started_at).total_seconds()
    return Record(
        unit=unit.key,
        sample_id=unit.sample.id,
        config=unit.config.name,
        config_key=unit.config.key,
        repeat=unit.repeat,
        attempt=unit.attempt,
        status=status,
        output=result.output if result else None,
        target=unit.sample.target,
        error=error,
        cause=result.cause if result else None,
        wrapped_up=result.wrapped_up if result else False,
        usage=usage,
        latency=latency,
        job_id=flight.job_id,
        finished_at=datetime.now(UTC),
    )


def _finish(run: _Run, flight: Flight, record: Record) -> None:
    """Write the record and mark the claim (``_write``), and count it; a failure with attempts left goes again."""
    run.ended.append(record)
    run.marks.append((flight.unit.key, flight.job_id, record.status))
    run.tokens += record.usage.total_tokens
    if record.status == SKIPPED_BUDGET:
        run.skipped += 1
    elif record.status in RETRYABLE and flight.unit.attempt <= run.retries and not run.dry:
        flight.unit.attempt += 1
        run.again.append(flight.unit)
    else:
        run.count(record)
        if record.kept:
            run.done += 1
        else:
            run.failed += 1


def _sweep_refused(run: _Run, result: AgentResult) -> bool:
    """Whether the job ended because the sweep's own scope was short (not its own budget, nor another scope)."""
    cause = result.cause
    return cause is not None and cause.kind is CauseKind.BUDGET and cause.scope == run.manifest.scope


def _check_cancelled(run: _Run) -> None:
    """Once the sweep is cancelled, send nothing more and cancel what is in flight
    (``covey sweep-cancel`` cancels the jobs it finds claimed; these include any sent since)."""
    if run.cancelled or not run.claims.cancelled():
        return
    run.cancelled = True
    for job_id in run.flights:
        run.client.cancels.cancel_job(job_id)


def _check_dry(run: _Run) -> None:
    """The scope is dry once its used tokens, cycles or cost reach a cap, whatever is in flight."""
    m = run.manifest
    if run.dry or (m.max_tokens_total is None and m.max_cycles_total is None and m.max_cost_total is None):
        return
    row = next((r for r in run.client.ledger.scope_rows() if r.name == run.manifest.scope), None)
    if row is None:
        return
    run.dry = any(
        limit is not None and used >= limit
        for used, limit in (
            (row.tokens_used, row.tokens_limit),
            (row.cycles_used, row.cycles_limit),
            (row.cost_used, row.cost_limit),
        )
    )


def _skip_rest(run: _Run) -> None:
    """Record every unit not yet run as skipped_budget (without a job); units
    another live submitter holds are left to it."""
    run.busy.clear()
    while True:
        unit = _next_unit(run)
        if unit is None:
            return
        now = time.monotonic()
        record = _record(unit, Flight(unit, "", now), SKIPPED_BUDGET)
        record.job_id, record.latency = None, None
        run.log.append(record)
        run.skipped += 1
