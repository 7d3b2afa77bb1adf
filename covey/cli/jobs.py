"""Commands that submit jobs and follow them: run, submit, status, result, tree, ledger, cancel."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import click

from covey import render
from covey.cli.app import connect, print_json, cli
from covey.orchestration import registry


def _known(job_id: str, client=None):
    """The job's handle, or a clear error rather than waiting on an id nobody sent."""
    from covey.client import UNKNOWN

    handle = (client or connect()).job(job_id)
    if handle.status() == UNKNOWN:
        raise click.ClickException(
            f"unknown job {job_id}: never submitted, expired, or still queued from another Celery client"
        )
    return handle


RUN_GRACE_SECONDS = 30.0
NO_WORKER_HINT_SECONDS = 3.0  # how long a job may sit queued before we look for a worker


def _wait(client, handle, timeout: float | None):
    """Wait for the result; if the job is still queued after a few seconds and no
    worker reads its queue, say so instead of waiting in silence."""
    from covey.client import JobTimeout

    first = NO_WORKER_HINT_SECONDS if timeout is None else min(timeout, NO_WORKER_HINT_SECONDS)
    try:
        return handle.result(timeout=first)
    except JobTimeout:
        if timeout is not None and timeout <= first:
            raise
    if handle.status() == "queued" and not client.queue_has_worker():
        click.echo(
            f"warning: no worker reads queue {client.settings.queue!r}; job {handle.id} waits until one starts "
            "(covey worker)",
            err=True,
        )
    return handle.result(timeout=None if timeout is None else timeout - first)


def _job_options(fn):
    options = [
        click.option("--strategy", type=click.Choice(registry.names()), default="react", show_default=True),
        click.option("--model", default=None, help="model name (default: COVEY_MODEL, else sim)"),
        click.option("--role", default="root", show_default=True, help="the root agent's role name"),
        click.option("--max-tokens", type=int, default=None, help="token cap of the whole tree"),
        click.option("--max-cycles", type=int, default=None, help="model calls of the whole tree"),
        click.option("--max-agents", type=int, default=None, help="sub-agents the tree may spawn"),
        click.option("--max-depth", type=int, default=None, help="levels of sub-agents"),
        click.option("--max-call-tokens", type=click.IntRange(1), default=None,
                     help="completion cap of one model call (default 4096)"),
        click.option("--agent-max-cycles", type=click.IntRange(1), default=None,
                     help="model calls each agent may make on its own (default 20)"),
        click.option("--timeout", type=float, default=None, help="seconds the job may run"),
        click.option("--tenant", default=None, help="charge the tenant:<name> ledger scope too"),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _spec(client, task: str, o: dict[str, Any]):
    budget = {k: o[k] for k in ("max_tokens", "max_cycles", "max_agents", "max_depth") if o[k] is not None}
    if o["timeout"] is not None:
        if o["timeout"] <= 0:
            raise click.BadParameter("must be positive", param_hint="--timeout")
        budget["deadline"] = datetime.now(timezone.utc) + timedelta(seconds=o["timeout"])
    fields: dict[str, Any] = {"strategy": o["strategy"], "role": o["role"], "budget": budget}
    if o["max_call_tokens"] is not None:
        fields["max_call_tokens"] = o["max_call_tokens"]
    if o["agent_max_cycles"] is not None:
        fields["max_cycles"] = o["agent_max_cycles"]
    if o["model"]:
        fields["model"] = o["model"]
    if o["tenant"]:
        fields["tenant"] = o["tenant"]
    return client.spec(task, **fields)


@cli.command()
@click.argument("task")
@_job_options
@click.option("--json", "as_json", is_flag=True, help="print the root AgentResult as JSON")
def run(task: str, as_json: bool, **options: Any) -> None:
    """Submit TASK and wait; exit 0 only when the job completed."""
    client = connect()
    handle = client.submit(_spec(client, task, options))
    click.echo(f"job {handle.id}", err=True)
    # The job's own deadline ends it; the grace covers a worker's last cycle.
    wait = None if options["timeout"] is None else options["timeout"] + RUN_GRACE_SECONDS
    _finish(_wait(client, handle, wait), as_json)


@cli.command()
@click.argument("task")
@_job_options
def submit(task: str, **options: Any) -> None:
    """Submit TASK and print its job id."""
    client = connect()
    click.echo(client.submit(_spec(client, task, options)).id)


@cli.command()
@click.argument("job_id")
def status(job_id: str) -> None:
    """Print the job's status; exit 1 when the job is unknown."""
    from covey.client import UNKNOWN

    state = connect().job(job_id).status()
    click.echo(state)
    sys.exit(1 if state == UNKNOWN else 0)


@cli.command()
@click.argument("job_id")
@click.option("--timeout", type=float, default=None, help="seconds to wait (default: until done)")
@click.option("--json", "as_json", is_flag=True, help="print the root AgentResult as JSON")
def result(job_id: str, timeout: float | None, as_json: bool) -> None:
    """Wait for the job's result; exit 0 only when it completed, 3 when the wait ran out."""
    client = connect()
    _finish(_wait(client, _known(job_id, client), timeout), as_json)


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help='print {"job_id", "nodes": [...]} as JSON')
def tree(job_id: str, as_json: bool) -> None:
    """Show every agent of the job."""
    nodes = connect().job(job_id).tree()
    if not nodes:
        raise click.ClickException(f"no agents recorded for job {job_id} (unknown, expired or not started)")
    if as_json:
        print_json({"job_id": job_id, "nodes": [n.model_dump(mode="json", include=_NODE_FIELDS) for n in nodes]})
    else:
        click.echo(render.tree(nodes))


_NODE_FIELDS = {
    "agent_id", "parent_id", "depth", "role", "status", "usage", "task", "error", "started_at", "finished_at",
}


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="print the ledger snapshot as JSON")
def ledger(job_id: str, as_json: bool) -> None:
    """Show the job's budget: used against limits, per agent and per global scope."""
    snapshot = connect().job(job_id).ledger()
    if not snapshot.agents:
        raise click.ClickException(f"no ledger for job {job_id} (unknown, expired or not started)")
    print_json(snapshot) if as_json else click.echo(render.ledger(snapshot))


@cli.command()
@click.argument("job_id")
def cancel(job_id: str) -> None:
    """Stop every agent of the job at its next cycle."""
    _known(job_id).cancel()
    click.echo(f"cancelling {job_id}")


def _finish(r, as_json: bool) -> None:
    if as_json:
        print_json(r)
    else:
        click.echo(render.result(r))
    sys.exit(0 if r.ok else 1)
