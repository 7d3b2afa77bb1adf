"""``covey approvals``, ``covey approve`` and ``covey deny``: the tool calls agents wait
to run until a person decides, and the decisions."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

import click

from covey.cli.app import cli, connect
from covey.store.approvals import Decision

ARGUMENTS_SHOWN = 60  # characters of a call's arguments in the table


@cli.command()
@click.option("--job", "job_id", default=None, help="only this job's")
@click.option("--json", "as_json", is_flag=True, help="print them as JSON")
def approvals(job_id: str | None, as_json: bool) -> None:
    """List the tool calls waiting for a person's decision (covey approve / covey deny)."""
    from covey.client import approvals as approving

    client = connect()
    waiting = approving.waiting(client, job_id)
    if as_json:
        click.echo(json.dumps([a.model_dump(mode="json", exclude_none=True) for a in waiting]))
        return
    if not waiting:
        click.echo("no tool call waits for a decision" + (f" in job {job_id}" if job_id else ""))
        return
    now = datetime.now(UTC)
    for a in waiting:
        click.echo(
            f"{a.job_id}  {a.call_id}  {a.tool}({_cut(a.arguments)})  "
            f"waiting {_ago(now, a.requested_at)}, denied in {_ago(a.until, now)} if undecided"
        )


@cli.command()
@click.argument("job_id")
@click.argument("call_id")
def approve(job_id: str, call_id: str) -> None:
    """Let agent's waiting tool call CALL_ID of JOB_ID run (once)."""
    _decide(job_id, call_id, "approved", None)


@cli.command()
@click.argument("job_id")
@click.argument("call_id")
@click.option("--reason", default=None, help="why: the model reads it as the call's result")
def deny(job_id: str, call_id: str, reason: str | None) -> None:
    """Refuse agent's waiting tool call CALL_ID of JOB_ID: it never runs, and the model reads why."""
    _decide(job_id, call_id, "denied", reason)


def _decide(job_id: str, call_id: str, decision: Decision, reason: str | None) -> None:
    from covey.client import approvals as approving

    handle = connect().job(job_id)
    try:
        decided = approving.decide(handle, call_id, decision, reason)
    except (approving.UnknownApproval, approving.JobEnded) as e:
        raise click.ClickException(str(e)) from None
    stands = decided.approval
    if decided.recorded:
        click.echo(f"{decision} call {call_id} of job {job_id}: agent {stands.agent_id} goes on")
        return
    said = f" ({stands.reason})" if stands.reason else ""
    click.echo(f"call {call_id} of job {job_id} was {stands.decision}{said} already: this decision counts for nothing")
    if stands.decision != decision:
        sys.exit(1)


def _cut(text: str) -> str:
    return text if len(text) <= ARGUMENTS_SHOWN else text[: ARGUMENTS_SHOWN - 1] + "…"


def _ago(later: datetime, earlier: datetime) -> str:
    seconds = max(0, round((later - earlier).total_seconds()))
    return (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
    )
