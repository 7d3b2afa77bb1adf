"""``covey plan``: a plan_execute agent's audit log, one step a row, as it ran."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from covey import wire
from covey.cli.app import cli, print_json
from covey.context import ROOT_AGENT_ID

SHOWN_CHARS = 60  # of a step's input and its output or error, on its row


@cli.command()
@click.argument("job_id")
@click.argument("agent", default=ROOT_AGENT_ID)
@click.option("--json", "as_json", is_flag=True, help="print the steps as JSON")
def plan(job_id: str, agent: str, as_json: bool) -> None:
    """Print the steps a plan_execute AGENT of JOB_ID (default: the root) ran: each
    step's role or tool, status, start, seconds, input and output or error, in the
    order they ended, once the agent has."""
    from covey.cli.jobs import _known

    node = next((n for n in _known(job_id).tree() if n.agent_id == agent), None)
    if node is None:
        raise click.ClickException(f"job {job_id} has no agent {agent!r}")
    steps = node.data.get("steps") if isinstance(node.data, dict) else None
    if steps is None:
        said = "has not finished" if not node.final else "ran no plan (its strategy is not plan_execute)"
        raise click.ClickException(f"agent {agent} of job {job_id} {said}")
    if as_json:
        print_json(steps)
    else:
        click.echo(table(steps))


def table(steps: list[dict[str, Any]]) -> str:
    """One row per step: what ran it, how it ended, when, for how long, on what, to what."""
    return wire.table(
        ["step", "by", "status", "started", "seconds", "input", "output or error"],
        [
            (
                s["id"],
                f"tool {s['tool']}" if s.get("tool") else s.get("role"),
                s["status"],
                _clock(s.get("started_at")),
                _seconds(s.get("started_at"), s.get("finished_at")),
                _line(s.get("input")),
                _line(s.get("output") if s.get("error") is None else f"error: {s['error']}"),
            )
            for s in steps
        ],
    )


def _clock(at: str | None) -> str | None:
    return None if at is None else datetime.fromisoformat(at).strftime("%H:%M:%S.%f")[:-3]


def _seconds(started: str | None, finished: str | None) -> str | None:
    if started is None or finished is None:
        return None
    return f"{(datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds():.3f}"


def _line(text: str | None) -> str | None:
    return None if text is None else wire.cut(" ".join(text.split()), SHOWN_CHARS)
