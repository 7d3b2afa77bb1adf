"""Commands that run covey's processes and settings: worker, flower, sim-server, demo, scope."""

from __future__ import annotations

import os
import sys

import click

from covey.budgets import scopes
from covey.budgets.budget import MAX_COUNT
from covey.budgets.ledger import ScopeRow
from covey.budgets.running import MAX_WEIGHT, RunningSlots
from covey.cli import render
from covey.cli.app import cli, connect, print_json
from covey.cli.options import Dollars
from covey.cli.ui import DEFAULT_PORT as UI_PORT
from covey.config.settings import MAX_CONCURRENCY, MAX_PROCESSES, get_settings


@cli.command()
@click.option(
    "--processes",
    "-p",
    type=click.IntRange(1, MAX_PROCESSES),
    default=None,
    help="worker processes (default COVEY_WORKER_PROCESSES, else one per core; one for prefork)",
)
@click.option(
    "--concurrency",
    "-c",
    type=click.IntRange(1, MAX_CONCURRENCY),
    default=None,
    help="slots per process (default COVEY_WORKER_CONCURRENCY, else 100 threads, 500 gevent, 4 prefork)",
)
@click.option(
    "--pool",
    type=click.Choice(["threads", "prefork", "gevent", "solo"]),
    default=None,
    help="Celery pool (default COVEY_WORKER_POOL, threads)",
)
@click.option("--loglevel", "-l", default="info", show_default=True)
@click.option("--hostname", "-n", default=None, help="worker name, as Celery's -n (each process adds -1, -2, ...)")
@click.option(
    "--queues",
    "-Q",
    default=None,
    help="comma-separated queues to read, in order (default COVEY_QUEUE then COVEY_SWEEP_QUEUE: covey,covey-sweeps)",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    envvar="COVEY_METRICS_PORT",
    help="serve Prometheus metrics of every worker process on this port, 0 for any free one, named on stderr "
    "(default COVEY_METRICS_PORT, else none)",
)
def worker(
    processes: int | None,
    concurrency: int | None,
    pool: str | None,
    loglevel: str,
    hostname: str | None,
    queues: str | None,
    metrics_port: int | None,
) -> None:
    """Run covey's worker: a Celery worker per core, each with many slots."""
    from covey.models.catalog import Catalog
    from covey.tools import registry
    from covey.tools.mcp import McpFileError, McpServers
    from covey.worker import processes as worker_processes
    from covey.worker import signing

    s = get_settings()
    Catalog.from_settings(s)  # a bad models file stops the worker here, not at its first job
    _check_database(s.redis_url, s.redis_master)
    try:
        signing.shared_secret(s.secret, s.broker)  # made here once, before the processes that share it start
    except signing.SecretRequired as e:
        raise click.ClickException(str(e)) from None
    pool = pool or s.worker_pool
    given = queues.split(",") if queues is not None else [s.queue, s.sweep_queue]
    names = list(dict.fromkeys(q.strip() for q in given if q.strip()))
    if not names:
        raise click.BadParameter("name at least one queue", param_hint="--queues")
    count = processes or s.worker_processes or (1 if pool == "prefork" else os.cpu_count() or 1)
    slots = concurrency or s.model_copy(update={"worker_pool": pool}).worker_slots
    if metrics_port is not None:
        _serve_metrics(metrics_port, s.log_format)
    if count > 1:
        from covey.worker import logs

        logs.emit(s.log_format)  # the supervisor's own lines
        # Each process loads its tools and opens its MCP servers itself (covey.worker.app);
        # checked here too, so a tool that cannot load is one line, not one per process.
        try:
            registry.load(s.tools)
            if s.mcp is not None:
                McpServers.load(s.mcp)  # reads the file; starts no server
        except (registry.ToolsError, McpFileError) as e:
            raise click.ClickException(str(e)) from None
        sys.exit(
            worker_processes.run(
                lambda i: worker_processes.argv(pool, slots, loglevel, names, worker_processes.child_name(hostname, i)),
                count,
                dict(os.environ),
            )
        )
    # Pools (Redis, broker, result store) are sized from these settings: set them before the app is built.
    os.environ.update(COVEY_WORKER_POOL=pool, COVEY_WORKER_CONCURRENCY=str(slots))
    get_settings.cache_clear()
    if pool == "gevent":
        _patch_for_gevent()
    from covey.worker.app import app

    argv = [
        "worker",
        f"--pool={pool}",
        f"--concurrency={slots}",
        f"--loglevel={loglevel}",
        f"--queues={','.join(names)}",
    ]
    if get_settings().task_events:
        argv.append("--events")
    if hostname:
        argv.append(f"--hostname={hostname}")
    sys.exit(app.start(argv))  # worker_main drops the exit code: an unrecoverable error would exit 0


def _check_database(url: str, master: str | None) -> None:
    """A URL naming a database the Redis has not stops the worker with one line
    (``redis.ResponseError``, which the CLI words), where Celery would retry it for
    ever; a Redis not up yet is waited for, as Celery does."""
    import redis

    from covey.config import connections

    client = connections.client(url, master, socket_timeout=connections.SOCKET_TIMEOUT_SECONDS)
    try:
        client.ping()
    except (redis.ConnectionError, redis.TimeoutError):
        pass
    finally:
        client.close()


def _serve_metrics(port: int, log_format: str) -> None:
    """One endpoint for the samples every process of this worker writes to one folder
    (``covey.worker.metrics``): set before any process imports prometheus_client. A
    folder made here goes when the worker ends, however it ends (a busy port included)."""
    import atexit
    import shutil
    import tempfile

    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not folder:
        folder = tempfile.mkdtemp(prefix="covey-metrics-")
        atexit.register(shutil.rmtree, folder, True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder
    from covey.worker import logs, metrics

    metrics.prepare(folder)
    try:
        bound = metrics.serve(port)
    except OSError as e:  # bad input, as flower's busy port: exit 2
        click.echo(f"Error: --metrics-port {port}: {e.strerror or e}; give another --metrics-port", err=True)
        sys.exit(2)
    logs.announce(f"covey worker: metrics on http://127.0.0.1:{bound}/metrics (and every other interface)", log_format)


def _patch_for_gevent() -> None:
    """The gevent pool needs the standard library patched before any connection
    opens: ``covey.cli`` does it first thing; this covers a caller that came in
    another way (``cli`` called from Python)."""
    try:
        from gevent import monkey
    except ImportError:
        raise click.ClickException("the gevent pool needs gevent: pip install 'covey[gevent]'") from None
    if not monkey.is_module_patched("socket"):
        monkey.patch_all()


_REMOVE = "none"


class _Cap(click.ParamType):
    """A cap: a whole number from 0 to ``MAX_COUNT``, or ``none`` to remove it."""

    name = "N|none"

    def convert(self, value, param, ctx):
        if value == _REMOVE:
            return value
        if isinstance(value, str) and value.isascii() and value.isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
            return value
        self.fail(f"{value!r} is not a whole number from 0 to {MAX_COUNT}, nor 'none'", param, ctx)


class _CostCap(click.ParamType):
    """A cost cap in USD, or ``none`` to remove it."""

    name = "USD|none"

    def convert(self, value, param, ctx):
        return value if value == _REMOVE else Dollars().convert(value, param, ctx)


@cli.command()
@click.argument("name")
@click.option("--max-tokens", type=_Cap(), default=None, help="token cap across jobs ('none' removes it)")
@click.option("--max-cycles", type=_Cap(), default=None, help="model-call cap across jobs ('none' removes it)")
@click.option(
    "--tokens-per-minute",
    type=_Cap(),
    default=None,
    help="tokens granted per minute across jobs; a full minute makes agents wait ('none' removes it)",
)
@click.option(
    "--requests-per-minute",
    type=_Cap(),
    default=None,
    help="model calls per minute across jobs; a full minute makes agents wait ('none' removes it)",
)
@click.option(
    "--max-cost", type=_CostCap(), default=None, help="USD across jobs, priced models only ('none' removes it)"
)
@click.option(
    "--max-running",
    type=_Cap(),
    default=None,
    help="agents running at once across jobs; the rest wait outside the workers' slots ('none' removes it)",
)
@click.option(
    "--weight",
    type=click.IntRange(1, MAX_WEIGHT),
    default=None,
    help="a tenant's share of the capped scopes its agents wait for, against other tenants' (default 1)",
)
@click.option("--json", "as_json", is_flag=True, help="print the scope as JSON")
def scope(
    name: str,
    max_tokens,
    max_cycles,
    tokens_per_minute,
    requests_per_minute,
    max_cost,
    max_running,
    weight: int | None,
    as_json: bool,
) -> None:
    """Show a global ledger scope (global, tenant:<x>, sweep:<x>), creating it or changing the caps given.

    Agents waiting for a slot of a scope capped by --max-running are admitted in
    turn by tenant, each tenant in proportion to its --weight.
    """
    client = connect()
    ledger = client.ledger
    current = next((row for row in ledger.scope_rows() if row.name == name), None)
    given = (max_tokens, max_cycles, tokens_per_minute, requests_per_minute, max_cost)
    if any(cap is not None for cap in (*given, max_running, weight)):
        fields = ("tokens_limit", "cycles_limit", "tokens_per_minute", "requests_per_minute", "cost_limit")
        slots = RunningSlots(client.redis)
        try:
            if weight is not None:  # first: a weight the scope cannot take changes nothing
                slots.set_weight(name, weight)
            ledger.set_scope(
                name, *(_cap(cap, getattr(current, f) if current else None) for cap, f in zip(given, fields))
            )
            if max_running is not None:
                running = _cap(max_running, None)
                slots.set_cap(name, None if running is None else int(running))
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="NAME") from None
        current = next(row for row in ledger.scope_rows() if row.name == name)
    if current is None and name == scopes.GLOBAL:  # every job names it: it exists, uncapped and uncounted
        current = ScopeRow(name=name)
    if current is None:
        raise click.ClickException(
            f"no scope {name} yet: give --max-tokens, --max-cycles, --tokens-per-minute, "
            "--requests-per-minute, --max-cost, --max-running or --weight to create it"
        )
    print_json(current) if as_json else click.echo(render.scopes([current]))


def _cap(given, current: float | None) -> float | None:
    """The cap to write: as given, removed for 'none', kept when not given."""
    return current if given is None else None if given == _REMOVE else given


@cli.command()
@click.option("--port", type=click.IntRange(0, 65535), default=5555, show_default=True, help="0: any free port")
@click.option("--address", default="127.0.0.1", show_default=True)
@click.option("--basic-auth", envvar="COVEY_FLOWER_BASIC_AUTH", default=None, help="user:password[,user2:pw2]")
@click.option(
    "--ui",
    envvar="COVEY_UI_URL",
    default=f"http://127.0.0.1:{UI_PORT}",
    show_default=True,
    help="where `covey ui` serves: each task's page links to its job's there ('none': no link)",
)
def flower(port: int, address: str, basic_auth: str | None, ui: str) -> None:
    """Run Flower on covey's broker, to watch tasks and workers live.

    Find a job's tasks by typing its id in the tasks page's search box; a task's
    page links to its job's page in `covey ui`. A non-loopback --address needs
    --basic-auth, which also guards /metrics.
    """
    from covey.cli import exposure
    from covey.cli import flower as covey_flower

    exposure.serve_or_exit(address, port, basic_auth, "Flower", "COVEY_FLOWER_BASIC_AUTH")
    covey_flower.configure(None if ui == "none" else ui)
    from covey.worker.app import app

    app.conf.broker_transport = None  # Flower tells brokers apart by their URL's scheme: kombu's own names
    # Workers send task events only when asked (COVEY_TASK_EVENTS, or Flower): ask every
    # live one now, so no task is missed before Flower's first periodic ask (5 s).
    app.control.enable_events()
    app.start(covey_flower.argv(port, address, basic_auth))


@cli.command("sim-server")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="0: any free port")
def sim_server(host: str, port: int) -> None:
    """Serve the sim model over HTTP (an OpenAI-compatible chat completions endpoint);
    its address, once it listens, is the first line on standard error."""
    from covey.cli import exposure
    from covey.models.sim.server import make_server, serve

    try:
        server = make_server(host, port, latency_ms=get_settings().sim_latency_ms)
    except OSError as e:
        exposure.exit_saying(exposure.busy(host, port, e))
    click.echo(f"sim model on http://{host}:{server.server_address[1]}/v1", err=True)
    serve(server)


@cli.command()
@click.option("--width", type=click.IntRange(1, 10), default=3, show_default=True, help="children per agent")
@click.option("--depth", type=click.IntRange(1, 4), default=2, show_default=True, help="levels below the root")
@click.option("--json", "as_json", is_flag=True, help='print {"result", "nodes", "ledger"} as JSON')
def demo(width: int, depth: int, as_json: bool) -> None:
    """Run a sim agent tree on a worker it starts and show its tree and ledger.

    It uses the Redis at COVEY_REDIS_URL, or starts a throwaway one when none
    answers there, and stops whatever it started.
    """
    from covey.cli.demo import run_demo

    sys.exit(run_demo(width, depth, as_json))
