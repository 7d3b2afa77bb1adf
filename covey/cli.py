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


def _known(job_id: str):
    """The job's handle, or a clear error rather than waiting on an id nobody sent."""
    from covey.client import UNKNOWN

    handle = _client().job(job_id)
    if handle.status() == UNKNOWN:
        raise click.ClickException(
            f"unknown job {job_id}: never submitted, expired, or still queued from another Celery client"
        )
    return handle


def _job_options(fn):
    options = [
        click.option("--strategy", type=click.Choice(STRATEGY_NAMES), default="react", show_default=True),
        click.option("--model", default=None, help="model name (default: COVEY_MODEL, else sim)"),
        click.option("--role", default="root", show_default=True),
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
@click.option("--concurrency", "-c", type=int, default=None, help="worker slots (default COVEY_WORKER_CONCURRENCY)")
@click.option("--pool", type=click.Choice(["threads", "prefork", "gevent", "solo"]), default=None)
@click.option("--loglevel", "-l", default="info", show_default=True)
@click.option("--hostname", "-n", default=None)
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
    if not as_json:
        click.echo(f"job {handle.id}", err=True)
    _finish(handle.result(), as_json)


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
    """Print the job's status."""
    click.echo(_client().job(job_id).status())


@cli.command()
@click.argument("job_id")
@click.option("--timeout", type=float, default=None, help="seconds to wait (default: until done)")
@click.option("--json", "as_json", is_flag=True)
def result(job_id: str, timeout: float | None, as_json: bool) -> None:
    """Wait for the job's result; exit 0 only when it completed."""
    _finish(_known(job_id).result(timeout=timeout), as_json)


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True)
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
@click.option("--json", "as_json", is_flag=True)
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


@cli.command()
@click.argument("name")
@click.option("--max-tokens", type=int, default=None)
@click.option("--max-cycles", type=int, default=None)
def scope(name: str, max_tokens: int | None, max_cycles: int | None) -> None:
    """Set the caps of a global ledger scope (global, tenant:<x>); no cap given removes it."""
    for flag, value in (("--max-tokens", max_tokens), ("--max-cycles", max_cycles)):
        if value is not None and value < 0:
            raise click.BadParameter("must be 0 or more", param_hint=flag)
    _client().ledger.set_scope(name, max_tokens, max_cycles)
    click.echo(f"scope {name}: max_tokens={max_tokens} max_cycles={max_cycles}")


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
    serve(host, port)


@cli.command()
@click.option("--width", type=int, default=3, show_default=True)
@click.option("--depth", type=int, default=2, show_default=True)
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
        click.echo(f"error: {e}", err=True)
        sys.exit(3)
    except (InvalidSpec, JobRefused) as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    except ValidationError as e:  # settings from COVEY_* variables
        click.echo(f"error: invalid configuration: {describe(e)}", err=True)
        sys.exit(2)
    except (redis.ConnectionError, OperationalError) as e:
        click.echo(f"error: cannot reach Redis ({get_settings().redis_url}): {e}", err=True)
        sys.exit(2)
