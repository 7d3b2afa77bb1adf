"""``covey jobs`` and ``covey retry``: the jobs sent lately, and one sent again."""

from __future__ import annotations

import click

from covey.cli import render
from covey.cli.app import cli, connect, print_json
from covey.status import JobStatus


@cli.command("jobs")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice([s.value for s in JobStatus if s is not JobStatus.UNKNOWN]),
    help="only jobs in this status (repeatable)",
)
@click.option("--tenant", default=None, help="only the jobs of this tenant (its name, without tenant:)")
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True, help="jobs shown, newest first")
@click.option("--json", "as_json", is_flag=True, help="print the rows as JSON")
def jobs(statuses: tuple[str, ...], tenant: str | None, limit: int, as_json: bool) -> None:
    """The newest jobs covey clients submitted, running or ended, while their records
    live (COVEY_JOB_TTL)."""
    if tenant is not None and tenant.startswith("tenant:"):
        raise click.BadParameter(
            f"give the name without its prefix: {tenant.removeprefix('tenant:')!r}", param_hint="--tenant"
        )
    entries = connect().jobs([JobStatus(s) for s in statuses], tenant, limit)
    if as_json:
        print_json([e.model_dump(mode="json") for e in entries])
    elif entries:
        click.echo(render.jobs(entries))
    else:
        click.echo("no jobs" + (" match" if statuses or tenant else " recorded"), err=True)


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help='print {"job_id": ..., "retry_of": ...} as JSON')
def retry(job_id: str, as_json: bool) -> None:
    """Submit JOB_ID's spec again, as a new job, and print the new job's id."""
    from covey.client.errors import UnknownJob

    try:
        handle = connect().retry(job_id)
    except UnknownJob as e:
        raise click.ClickException(str(e)) from None
    print_json({"job_id": handle.id, "retry_of": job_id}) if as_json else click.echo(handle.id)
