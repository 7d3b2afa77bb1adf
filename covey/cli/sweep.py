"""``covey sweep`` and ``covey sweep-report``: batch evaluation from the command line."""

from __future__ import annotations

import json
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from covey.budgets.budget import MAX_COUNT
from covey.cli.app import cli, interrupted
from covey.cli.options import Dollars, Seconds
from covey.config.settings import get_settings
from covey.status import AgentStatus

if TYPE_CHECKING:
    from covey.client import Client
    from covey.sweeps.report import ConfigSummary

PLAIN_EVERY_SECONDS = 5.0  # how often a plain (non-terminal) progress line is printed
UNREAD_EVERY_SECONDS = 10.0  # how often a sweep that no unit has finished in says again that no worker reads its queue
BAR_WIDTH = 30


class _BadInput(click.ClickException):
    exit_code = 2


class _Unfinished(click.ClickException):
    """``--timeout`` ran out first, as for ``covey run``."""

    exit_code = 3


@cli.command()
@click.argument("dataset", type=click.Path(dir_okay=False))
@click.option("--grid", "grid_path", required=True, type=click.Path(dir_okay=False), help="TOML or YAML grid")
@click.option(
    "--out", "out", required=True, type=click.Path(file_okay=False), help="directory of results; rerun to resume"
)
@click.option("--max-in-flight", type=click.IntRange(1), default=16, show_default=True, help="jobs enqueued at once")
@click.option(
    "--retries",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="more attempts for a failed, timed-out or refused sample",
)
@click.option(
    "--max-tokens-total", type=click.IntRange(1, MAX_COUNT), default=None, help="token cap of the whole sweep"
)
@click.option(
    "--max-cycles-total", type=click.IntRange(1, MAX_COUNT), default=None, help="model-call cap of the whole sweep"
)
@click.option("--max-cost-total", type=Dollars(), default=None, help="USD cap of the whole sweep (priced models)")
@click.option(
    "--queue", default=None, help="the queue the sweep's jobs go to (default COVEY_SWEEP_QUEUE, covey-sweeps)"
)
@click.option(
    "--timeout", type=Seconds(), default=None, help="seconds to wait for every sample; then exit 3 (the jobs go on)"
)
@click.option("--limit", type=click.IntRange(1), default=None, help="run the first N samples (after --shuffle)")
@click.option("--sample-id", "sample_ids", multiple=True, help="run only this sample (repeatable)")
@click.option("--shuffle", type=int, default=None, metavar="SEED", help="run the samples in an order shuffled by SEED")
@click.option(
    "--epochs",
    type=click.IntRange(1),
    default=None,
    help="run each sample this many times (the grid's repeats, 1 by default), as inspect's --epochs",
)
@click.option("--json", "as_json", is_flag=True, help="print the summary rows as JSON")
def sweep(
    dataset,
    grid_path,
    out,
    max_in_flight,
    retries,
    max_tokens_total,
    max_cycles_total,
    max_cost_total,
    queue,
    timeout,
    limit,
    sample_ids,
    shuffle,
    epochs,
    as_json,
) -> None:
    """Run every sample of DATASET through every configuration of the grid, as covey jobs.

    Exits 0 when every sample completed, 1 when any ended otherwise, 2 for bad
    input, 3 when --timeout ran out first.
    """
    from covey.client import Client
    from covey.sweeps import SweepInputError, chart, load_dataset, load_grid, run_sweep
    from covey.sweeps.dataset import digest
    from covey.sweeps.manifest import Manifest
    from covey.sweeps.selection import Selection
    from covey.sweeps.served import check_models

    settings = get_settings()
    selection = Selection(tuple(sample_ids), shuffle, limit)
    try:  # checked here, before any connection; run_sweep reads them again from the same files
        samples, grid = load_dataset(dataset), load_grid(grid_path).repeated(epochs)
        selection.apply(samples, Path(dataset).name)
        found = Manifest.check(Path(out), digest(samples), grid.digest)
        del samples  # run_sweep loads them again: one copy in memory while the sweep runs, not two
    except SweepInputError as e:
        raise _BadInput(str(e)) from None
    original = found.original(Path(out)) if found else None
    if found and original:
        click.echo(
            f"{out} is a copy of {original} (sweep {found.id}): it runs as a new sweep, with a cap of its own, "
            "keeping the results it holds",
            err=True,
        )
    queue = queue or settings.sweep_queue
    settings = settings.model_copy(update={"queue": queue})
    probe = Client(settings)
    probe.redis.ping()
    served = probe.catalog.entries(queue)
    try:  # what the workers on the queue serve, or (none publishing) this machine's settings
        check_models(grid, settings, Path(grid_path).name, queue, served, priced=max_cost_total is not None)
        _writable(Path(out))  # the last check: a refused sweep leaves no folder
    except SweepInputError as e:
        raise _BadInput(str(e)) from None
    # A live worker's catalog entry on the queue answers at once; only without one are
    # the workers asked, which waits out the broadcast's whole second.
    unread = not served and not probe.queue_has_worker()
    if unread:
        click.echo(f"warning: {_no_worker(queue)}", err=True)
    # A terminated submitter gives up its lease at once, so a rerun adopts its jobs without waiting.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    show = _Bar() if sys.stderr.isatty() and not as_json else _Lines()
    try:
        outcome = run_sweep(
            dataset,
            grid_path,
            out,
            settings=settings,
            max_in_flight=max_in_flight,
            retries=retries,
            max_tokens_total=max_tokens_total,
            max_cycles_total=max_cycles_total,
            max_cost_total=max_cost_total,
            queue=queue,
            observer=_preloading(_saying_unread(show, probe, queue), chart.preload),
            timeout=timeout,
            selection=selection,
            epochs=epochs,
        )
    except SweepInputError as e:  # a file changed since it was checked
        raise _BadInput(str(e)) from None
    except KeyboardInterrupt:
        show.close()
        interrupted(
            "the sweep's jobs in flight go on: rerun the same command to resume (it follows them), "
            f"or stop them with `covey sweep-cancel {out}`"
        )
    finally:
        show.close()
    if outcome.timed_out:
        unread = unread and not probe.queue_has_worker()
        why = f": {_no_worker(queue)}" if unread else _stuck(probe, outcome.still_running)
        probe.close()
        left = outcome.total - (outcome.progress.finished if outcome.progress else 0)
        raise _Unfinished(
            f"sweep {outcome.sweep_id}: {left} of {outcome.total} units unfinished after {timeout:g}s{why}; "
            "rerun the same command to resume"
        )
    probe.close()
    if outcome.cancelled:
        _report(Path(out), as_json)
        left = outcome.total - (outcome.progress.finished if outcome.progress else 0)
        click.echo(
            f"sweep {outcome.sweep_id} cancelled: {left} of {outcome.total} units not run; "
            "rerun the same command to resume them",
            err=as_json,
        )
        sys.exit(1)
    if outcome.dry:
        click.echo("the sweep's cap ran out: the samples it left are recorded skipped_budget", err=True)
    rows = _report(
        Path(out),
        as_json,
        lead=f"sweep {outcome.sweep_id}: {outcome.total} units, {outcome.submitted} jobs "
        f"sent, {outcome.adopted} adopted, peak in flight {outcome.peak_in_flight}",
    )
    others: Counter[str] = Counter()
    for r in rows:
        others.update({s: n for s, n in r.statuses.items() if s != AgentStatus.COMPLETED})
    if others:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(others.items()))
        units = sum(r.units for r in rows)
        click.echo(f"{others.total()} of {units} units did not complete ({counts})", err=as_json)
        sys.exit(1)


def _stuck(probe: Client, jobs: list[str]) -> str:
    """Why the oldest job still running is not moving, when the broker, the workers or
    its tree can tell (a job that is only slow says nothing)."""
    why = probe.job(jobs[0]).why_stuck() if jobs else None
    return f": {why}" if why else ""


def _no_worker(queue: str) -> str:
    hint = "covey worker" if queue == get_settings().sweep_queue else f"covey worker --queues covey,{queue}"
    return f"no worker reads queue {queue}: start one with `{hint}`"


@cli.command("sweep-cancel")
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
def sweep_cancel(directory) -> None:
    """Cancel the sweep in DIRECTORY: its jobs in flight stop at their next model call,
    and a running `covey sweep` sends no more, then exits 1 (a rerun resumes)."""
    from covey.cli.app import connect
    from covey.sweeps import SweepInputError
    from covey.sweeps.claims import Claims
    from covey.sweeps.manifest import Manifest

    try:
        found = Manifest.check(Path(directory), None, None)
    except SweepInputError as e:
        raise _BadInput(str(e)) from None
    if found is None:
        raise _BadInput(f"{directory}: no sweep.json here, so no sweep to cancel")
    original = found.original(Path(directory))
    if original is not None:
        raise _BadInput(f"{directory} is a copy of {original}, where sweep {found.id} runs: cancel it there")
    client = connect()
    jobs = Claims(client.redis, found.id, client.settings.job_ttl).cancel()
    for job_id in jobs:
        client.job(job_id).cancel()
    click.echo(f"sweep {found.id} cancelled: {len(jobs)} jobs in flight stop at their next model call")


@cli.command("sweep-report")
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
@click.option(
    "--scorer",
    "scorers",
    multiple=True,
    metavar="NAME",
    help="re-score the recorded outputs with this scorer (repeatable; a kind, a grid's scorer, module:function)",
)
@click.option("--json", "as_json", is_flag=True, help="print the summary rows as JSON")
@click.option("--sample", "sample_id", default=None, help="print this sample's transcripts instead of the summary")
@click.option(
    "--export",
    "export",
    is_flag=True,
    help="write the sweep's transcripts to DIR/transcripts.jsonl, which outlives Redis",
)
def sweep_report(directory, scorers, as_json, sample_id, export) -> None:
    """Rebuild DIR/summary.csv and DIR/summary.png from DIR/results.jsonl and print the table.

    With --scorer, the outputs recorded there are scored again, the first scorer
    as the accuracy, each one's mean beside it; nothing runs and Redis is not used.
    With --sample or --export, read the transcripts of the sweep's jobs instead,
    while their records last in Redis (COVEY_JOB_TTL)."""
    if sample_id is None and not export:
        lead = f"re-scored from the outputs recorded; accuracy by {scorers[0]}" if scorers else None
        _report(Path(directory), as_json, lead=lead, scorers=list(scorers))
        return
    if scorers:
        raise _BadInput("--scorer re-scores the summary; it does not go with --sample or --export")
    from covey.cli.app import connect
    from covey.cli.transcripts import show
    from covey.sweeps import SweepInputError
    from covey.sweeps import transcripts as sweep_transcripts

    client = connect()
    try:
        if export:
            path, units = sweep_transcripts.export(Path(directory), client)
            gone = sum(u.expired for u in units)
            kept = sum(t is not None for u in units for _, t in u.agents)
            click.echo(
                f"wrote {path}: {len(units)} units, {kept} transcripts" + (f", {gone} jobs expired" if gone else "")
            )
        if sample_id is not None:
            units = sweep_transcripts.of_sample(Path(directory), sample_id, client)
            if as_json:
                click.echo(json.dumps([u.line() for u in units], indent=2))
            else:
                show([line for u in units for line in _unit_lines(u)])
    except SweepInputError as e:
        raise _BadInput(str(e)) from None
    finally:
        client.close()


def _unit_lines(unit):
    from covey.cli.transcripts import lines_of

    r = unit.record
    lines = [("bold", f"unit {r.unit} · config {r.config} · repeat {r.repeat} · {r.status} · job {r.job_id or '-'}")]
    if r.job_id is None:
        lines.append(("dim", "  no job ran for it, so no transcript"))
    elif unit.expired:
        lines.append(
            (
                "yellow",
                f"  the records of job {r.job_id} have expired from Redis (COVEY_JOB_TTL): no transcript left; "
                "`covey sweep-report DIR --export` keeps them while they last",
            )
        )
    else:
        lines += lines_of(unit.agents)
    return [*lines, ("", "")]


def _report(
    directory: Path, as_json: bool, lead: str | None = None, scorers: list[str] | None = None
) -> list[ConfigSummary]:
    """Rebuild and print the summary; returns its rows."""
    from covey.sweeps import SweepInputError
    from covey.sweeps.report import SUMMARY_CSV, SUMMARY_PNG, build_report, table

    try:
        rows, drawn = build_report(directory, scorers)
    except (FileNotFoundError, SweepInputError) as e:
        raise _BadInput(str(e)) from None
    if as_json:
        click.echo(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
        return rows
    if lead:
        click.echo(lead)
    click.echo(table(rows))
    files = [directory / SUMMARY_CSV] + ([directory / SUMMARY_PNG] if drawn else [])
    click.echo("wrote " + ", ".join(str(f) for f in files))
    if not drawn:
        click.echo("no chart: matplotlib is not installed (pip install 'covey[sweeps]')", err=True)
    return rows


class _Bar:
    """A live bar on standard error for a person at a terminal."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self._live = Live(console=Console(stderr=True), transient=True, refresh_per_second=4)
        self._live.start()

    def __call__(self, progress) -> None:
        from rich.text import Text

        filled = int(BAR_WIDTH * progress.finished / max(1, progress.total))
        self._live.update(Text(f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {progress.line()}"))

    def close(self) -> None:
        self._live.stop()


def _saying_unread(show: Callable[[Any], None], probe: Any, queue: str) -> Callable[[Any], None]:
    """``show``, which, while no unit finishes for ``UNREAD_EVERY_SECONDS`` and no
    worker publishes its catalog on ``queue``, says again why nothing moves (a
    warning at the start scrolls away under the progress lines)."""
    finished, since = -1, time.monotonic()

    def observe(progress: Any) -> None:
        nonlocal finished, since
        show(progress)
        now = time.monotonic()
        if progress.finished != finished:
            finished, since = progress.finished, now
        elif now - since >= UNREAD_EVERY_SECONDS:
            since = now
            if not probe.catalog.entries(queue):
                click.echo(f"waiting: {_no_worker(queue)}", err=True)

    return observe


def _preloading(show: Callable[[Any], None], preload: Callable[[], None]) -> Callable[[Any], None]:
    """``show``, which also starts ``preload`` (the chart's imports) at the first progress:
    the first jobs are out by then, and the submitter mostly waits on them."""
    started = False

    def observe(progress: Any) -> None:
        nonlocal started
        if not started:
            started = True
            preload()
        show(progress)

    return observe


class _Lines:
    """Plain progress lines on standard error, every few seconds and at the end."""

    def __init__(self) -> None:
        self._last_at = 0.0
        self._last = None  # the latest progress, until it is printed

    def __call__(self, progress) -> None:
        self._last = progress
        if time.monotonic() - self._last_at >= PLAIN_EVERY_SECONDS:
            self._last_at = time.monotonic()
            self._print()

    def close(self) -> None:
        """Print the last line, unless it was just printed; once, however often it is called."""
        self._print()

    def _print(self) -> None:
        if self._last is not None:
            click.echo(self._last.line(), err=True)
            self._last = None


def _writable(out: Path) -> None:
    """``--out`` made, or one line saying why it cannot be, before anything is sent."""
    from covey.sweeps import SweepInputError

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SweepInputError(f"--out {out}: {e.strerror or e}") from None
