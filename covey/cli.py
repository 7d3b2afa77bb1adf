"""The ``covey`` command."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import click
import redis
from kombu.exceptions import OperationalError
from pydantic import ValidationError

from covey import render
from covey.config.settings import get_settings
from covey.orchestration.registry import STRATEGY_NAMES
from covey.spec import InvalidSpec, describe


def _client():
    from covey.client import Client

    client = Client()
    client.redis.ping()  # an unreachable Redis is one clear line, not a backend traceback
    return client


def _known(job_id: str, client=None):
    """The job's handle, or a clear error rather than waiting on an id nobody sent."""
    from covey.client import UNKNOWN

    handle = (client or _client()).job(job_id)
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
            "(covey worker)", err=True,
        )
    return handle.result(timeout=None if timeout is None else timeout - first)


def _job_options(fn):
    options = [
        click.option("--strategy", type=click.Choice(STRATEGY_NAMES), default="react", show_default=True),
        click.option("--model", default=None, help="model name (default: COVEY_MODEL, else sim)"),
        click.option("--role", default="root", show_default=True, help="the root agent's role name"),
        click.option("--max-tokens", type=int, default=None, help="token cap of the whole tree"),
        click.option("--max-cycles", type=int, default=None, help="model calls of the whole tree"),
        click.option("--max-agents", type=int, default=None, help="sub-agents the tree may spawn"),
        click.option("--max-depth", type=int, default=None, help="levels of sub-agents"),
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
    if o["model"]:
        fields["model"] = o["model"]
    if o["tenant"]:
        fields["tenant"] = o["tenant"]
    return client.spec(task, **fields)


def _dump(model) -> None:
    click.echo(json.dumps(model.model_dump(mode="json") if hasattr(model, "model_dump") else model, indent=2))


@click.group()
def cli() -> None:
    """covey: trees of LLM agents as Celery tasks under a Redis budget ledger."""


@cli.command()
@click.option("--concurrency", "-c", type=click.IntRange(1), default=None,
              help="worker slots (default COVEY_WORKER_CONCURRENCY)")
@click.option("--pool", type=click.Choice(["threads", "prefork", "gevent", "solo"]), default=None,
              help="Celery pool (default COVEY_WORKER_POOL, threads)")
@click.option("--loglevel", "-l", default="info", show_default=True)
@click.option("--hostname", "-n", default=None, help="worker name, as Celery's -n")
def worker(concurrency: int | None, pool: str | None, loglevel: str, hostname: str | None) -> None:
    """Run a Celery worker for covey's tasks."""
    s = get_settings()
    pool = pool or s.worker_pool
    if pool == "gevent":
        _patch_for_gevent()
    from covey.worker.app import app

    argv = ["worker", f"--pool={pool}", f"--concurrency={concurrency or s.worker_concurrency}",
            f"--loglevel={loglevel}", f"--queues={s.queue}", "--events"]
    if hostname:
        argv.append(f"--hostname={hostname}")
    app.worker_main(argv)


def _patch_for_gevent() -> None:
    """The gevent pool needs the standard library patched before any connection opens."""
    try:
        from gevent import monkey
    except ImportError:
        raise click.ClickException("the gevent pool needs gevent: pip install 'covey[gevent]'") from None
    monkey.patch_all()


@cli.command()
@click.argument("task")
@_job_options
@click.option("--json", "as_json", is_flag=True, help="print the root AgentResult as JSON")
def run(task: str, as_json: bool, **options: Any) -> None:
    """Submit TASK and wait; exit 0 only when the job completed."""
    client = _client()
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
    client = _client()
    click.echo(client.submit(_spec(client, task, options)).id)


@cli.command()
@click.argument("job_id")
def status(job_id: str) -> None:
    """Print the job's status; exit 1 when the job is unknown."""
    from covey.client import UNKNOWN

    state = _client().job(job_id).status()
    click.echo(state)
    sys.exit(1 if state == UNKNOWN else 0)


@cli.command()
@click.argument("job_id")
@click.option("--timeout", type=float, default=None, help="seconds to wait (default: until done)")
@click.option("--json", "as_json", is_flag=True, help="print the root AgentResult as JSON")
def result(job_id: str, timeout: float | None, as_json: bool) -> None:
    """Wait for the job's result; exit 0 only when it completed, 3 when the wait ran out."""
    client = _client()
    _finish(_wait(client, _known(job_id, client), timeout), as_json)


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help='print {"job_id", "nodes": [...]} as JSON')
def tree(job_id: str, as_json: bool) -> None:
    """Show every agent of the job."""
    nodes = _client().job(job_id).tree()
    if not nodes:
        raise click.ClickException(f"no agents recorded for job {job_id} (unknown, expired or not started)")
    if as_json:
        _dump({"job_id": job_id, "nodes": [n.model_dump(mode="json", include=_NODE_FIELDS) for n in nodes]})
    else:
        click.echo(render.tree(nodes))


_NODE_FIELDS = {"agent_id", "parent_id", "depth", "role", "status", "usage"}


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="print the ledger snapshot as JSON")
def ledger(job_id: str, as_json: bool) -> None:
    """Show the job's budget: used against limits, per agent and per global scope."""
    snapshot = _client().job(job_id).ledger()
    if not snapshot.agents:
        raise click.ClickException(f"no ledger for job {job_id} (unknown, expired or not started)")
    _dump(snapshot) if as_json else click.echo(render.ledger(snapshot))


@cli.command()
@click.argument("job_id")
def cancel(job_id: str) -> None:
    """Stop every agent of the job at its next cycle."""
    _known(job_id).cancel()
    click.echo(f"cancelling {job_id}")


_REMOVE = "none"


class _Cap(click.ParamType):
    """A cap: a whole number of 0 or more, or ``none`` to remove it."""

    name = "N|none"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value == _REMOVE:
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
        self.fail(f"{value!r} is not a whole number of 0 or more, nor 'none'", param, ctx)


@cli.command()
@click.argument("name")
@click.option("--max-tokens", type=_Cap(), default=None, help="token cap across jobs ('none' removes it)")
@click.option("--max-cycles", type=_Cap(), default=None, help="model-call cap across jobs ('none' removes it)")
def scope(name: str, max_tokens, max_cycles) -> None:
    """Show a global ledger scope (global, tenant:<x>, sweep:<x>), changing the caps given."""
    ledger = _client().ledger
    current = next((row for row in ledger.scope_rows() if row.name == name), None)
    if max_tokens is not None or max_cycles is not None:
        try:
            ledger.set_scope(
                name,
                _cap(max_tokens, current.tokens_limit if current else None),
                _cap(max_cycles, current.cycles_limit if current else None),
            )
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="NAME") from None
        current = next(row for row in ledger.scope_rows() if row.name == name)
    if current is None:
        raise click.ClickException(f"no scope {name} yet: give --max-tokens or --max-cycles to create it")
    click.echo(render.scopes([current]))


def _cap(given, current: int | None) -> int | None:
    """The cap to write: as given, removed for 'none', kept when not given."""
    return current if given is None else None if given == _REMOVE else given


@cli.command()
@click.option("--port", type=int, default=5555, show_default=True)
@click.option("--address", default="127.0.0.1", show_default=True)
@click.option("--basic-auth", envvar="COVEY_FLOWER_BASIC_AUTH", default=None, help="user:password[,user2:pw2]")
def flower(port: int, address: str, basic_auth: str | None) -> None:
    """Run Flower on covey's broker, to watch tasks and workers live."""
    from covey.worker.app import app

    argv = ["flower", f"--port={port}", f"--address={address}"]
    if basic_auth:
        argv.append(f"--basic-auth={basic_auth}")
    app.start(argv)


@cli.command("sim-server")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8765, show_default=True)
def sim_server(host: str, port: int) -> None:
    """Serve the sim model over HTTP (an OpenAI-compatible chat completions endpoint)."""
    from covey.worker.sim_server import serve

    click.echo(f"sim model on http://{host}:{port}/v1", err=True)
    serve(host, port, latency_ms=get_settings().sim_latency_ms)


@cli.command()
@click.option("--width", type=click.IntRange(1, 10), default=3, show_default=True, help="children per agent")
@click.option("--depth", type=click.IntRange(1, 4), default=2, show_default=True, help="levels below the root")
def demo(width: int, depth: int) -> None:
    """Start a worker, run a sim agent tree on it, show the tree, stop the worker."""
    from covey.demo import run_demo

    sys.exit(run_demo(width, depth))


def _finish(r, as_json: bool) -> None:
    if as_json:
        _dump(r)
    else:
        click.echo(render.result(r))
    sys.exit(0 if r.ok else 1)


def main() -> None:
    from covey.client import JobRefused, JobTimeout

    try:
        cli(standalone_mode=True)
    except JobTimeout as e:
        _fail(str(e), 3)
    except (InvalidSpec, JobRefused) as e:
        _fail(str(e), 2)
    except ValidationError as e:  # settings from COVEY_* variables
        _fail(f"invalid configuration: {describe(e)}", 2)
    except redis.ConnectionError as e:
        _fail(f"cannot reach Redis ({get_settings().redis_url}): {e}", 2)
    except OperationalError as e:
        _fail(f"cannot reach the broker ({get_settings().broker}): {e}", 2)


def _fail(message: str, code: int) -> None:
    """One line, worded like click's own errors."""
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)
