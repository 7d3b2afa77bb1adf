"""``covey session show|delete NAME``: a conversation kept across the jobs run on it."""

from __future__ import annotations

import click

from covey.cli.app import cli, connect, print_json
from covey.wire import cut

SHOWN_CHARS = 200  # of each task and answer


@cli.group()
def session() -> None:
    """A session's conversation: jobs run with --session NAME continue it."""


@session.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="print it as JSON")
def show(name: str, as_json: bool) -> None:
    """Print NAME's turns so far, oldest first, and the job running on it."""
    found = connect().session(name)
    if found is None:
        raise click.ClickException(f"no session {name}: no job ran on it, or it expired (COVEY_SESSION_TTL)")
    if as_json:
        print_json(found)
        return
    if found.dropped:
        click.echo(f"({found.dropped} earlier turns dropped: past COVEY_SESSION_BYTES)")
    for turn in found.turns:
        click.echo(f"{turn.at:%Y-%m-%d %H:%M:%S}  job {turn.job_id}")
        click.echo(f"  user       {cut(turn.task, SHOWN_CHARS)}")
        click.echo(f"  assistant  {cut(turn.answer, SHOWN_CHARS)}")
    if found.job_id:
        click.echo(f"job {found.job_id} runs on it now")


@session.command()
@click.argument("name")
def delete(name: str) -> None:
    """Forget NAME's conversation (and free it, should a job's claim outlive its job)."""
    if not connect().delete_session(name):
        raise click.ClickException(f"no session {name}")
    click.echo(f"session {name} deleted")
