"""``covey demo``: covey's main job on the embedded default, with no setup.

It uses the Redis at ``COVEY_REDIS_URL`` when one answers there, in a database of
it that is empty (so its worker takes no job of the deployment's and none of the
deployment's workers takes its jobs), and empties that database again at the end;
else, or with no empty database, it starts a throwaway Redis (``covey.cli.embedded``).
It starts a real worker process (concurrency 1, to show that waiting parents hold
no slot), runs a sim agent tree, prints the result, the tree and the ledger, and
stops what it started. The worker's log lives in an unnamed temporary file, shown
only when the job did not finish, so nothing is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit, urlunsplit

import click
import redis
from kombu.utils.url import maybe_sanitize_url

from covey import keys
from covey.cli import render
from covey.cli.embedded import EmbeddedRedis, NoRedisBinary, answers
from covey.config.settings import Settings, get_settings

DEMO_TIMEOUT_SECONDS = 120
LOG_TAIL_BYTES = 4000  # the end of the worker's log, enough for its last traceback
FLOWER_HINT = "watch jobs live in Flower: covey worker & covey flower, then open http://127.0.0.1:5555"


def run_demo(width: int, depth: int, as_json: bool = False) -> int:
    """Run the demo; with ``as_json`` the result, tree and ledger are printed as one
    JSON document and the narration goes to standard error."""
    settings = get_settings()
    where = maybe_sanitize_url(settings.redis_url)
    why = f"no Redis answers at {where}"
    if answers(settings.redis_url, settings.redis_master):
        spare = _empty_database(settings.redis_url)
        if spare is not None:
            click.echo(
                f"using the Redis at {where}, in its database {spare.rpartition('/')[2]}, which is empty: "
                "emptied again when the demo ends",
                err=as_json,
            )
            try:
                return _run(_on(settings, spare), width, depth, as_json, embedded=False)
            finally:
                _empty(spare)
        why = f"the Redis at {where} has no empty database for the demo"
    try:
        redis_server = EmbeddedRedis()
    except NoRedisBinary as e:
        click.echo(f"Error: {why}, and {e}", err=True)
        return 2
    with redis_server:
        click.echo(
            f"{why}: started {redis_server.binary} on 127.0.0.1:{redis_server.port} for this demo "
            "(stopped when it ends)",
            err=as_json,
        )
        return _run(_on(settings, redis_server.url), width, depth, as_json, embedded=True)


def _on(settings: Settings, url: str) -> Settings:
    """Everything on the demo's Redis: ledger, broker and result backend."""
    return settings.model_copy(update={"redis_url": url, "broker_url": None, "result_backend": None})


DEMO_DATABASES = range(1, 16)  # Redis has 16 by default; a deployment's keys live in the URL's, mostly 0


def _empty_database(url: str) -> str | None:
    """The URL of an empty database of the Redis at ``url``, marked as the demo's;
    None when it has none (a Redis Cluster has only database 0)."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        return None
    for db in DEMO_DATABASES:
        candidate = urlunsplit(parts._replace(path=f"/{db}"))
        client = redis.Redis.from_url(candidate, socket_connect_timeout=1, socket_timeout=2)
        try:
            if client.dbsize() == 0 and client.set(keys.demo(), 1, nx=True):
                return candidate
        except redis.ResponseError:  # past the last database, or SELECT refused
            return None
        finally:
            client.close()
    return None


def _empty(url: str) -> None:
    """Delete every key of the demo's database: it was empty when the demo took it."""
    client = redis.Redis.from_url(url)
    try:
        batch = []
        for key in client.scan_iter(count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                client.unlink(*batch)
                batch.clear()
        if batch:
            client.unlink(*batch)
    finally:
        client.close()


def _run(settings: Settings, width: int, depth: int, as_json: bool, embedded: bool) -> int:
    from covey.client import Client

    client = Client(settings)
    with tempfile.TemporaryFile(prefix="covey-demo-worker-") as log:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "covey",
                "worker",
                "--processes",
                "1",
                "--concurrency",
                "1",
                "--loglevel",
                "warning",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_worker_env(settings),
        )
        click.echo("worker started (concurrency 1)", err=as_json)
        try:
            task = f"[sim:spawn width={width} depth={depth}] survey the field"
            handle = client.submit(client.spec(task, budget={"max_depth": depth + 1}))
            click.echo(f"job {handle.id}: {task}", err=as_json)
            try:
                result = handle.result(timeout=DEMO_TIMEOUT_SECONDS)
            except Exception:
                _show_tail(log)
                raise
            nodes, ledger = handle.tree(), handle.ledger()
            sweep = _small_sweep(settings, as_json)
        finally:
            _stop(worker)
            client.close()
    if as_json:
        click.echo(
            json.dumps(
                {
                    "result": result.model_dump(mode="json"),
                    "nodes": [n.model_dump(mode="json") for n in nodes],
                    "ledger": ledger.model_dump(mode="json"),
                },
                indent=2,
            )
        )
    else:
        click.echo(render.result(result))
        click.echo()
        click.echo(render.tree(nodes))
        click.echo()
        click.echo(render.ledger_totals(ledger))
        click.echo()
        click.echo(sweep)
        click.echo()
    click.echo(FLOWER_HINT + ("; start a Redis first: this demo's has stopped" if embedded else ""), err=as_json)
    return 0 if result.ok else 1


DEMO_SWEEP_SAMPLES = 6
DEMO_GRID = """models = ["sim"]
strategies = ["react", "single"]
scorer = { kind = "numeric" }
"""


def _small_sweep(settings: Settings, as_json: bool) -> str:
    """A sweep of a few arithmetic questions across two strategies, on the demo's
    own queue, in a directory removed afterwards; its report table."""
    from covey.sweeps.dataset import Sample
    from covey.sweeps.grid import load_grid
    from covey.sweeps.records import ResultsLog
    from covey.sweeps.report import summarize, table
    from covey.sweeps.runner import run_sweep

    samples = [
        Sample(id=f"q{i}", input=f"What is {i} * {i + 3}?", target=str(i * (i + 3)))
        for i in range(1, DEMO_SWEEP_SAMPLES + 1)
    ]
    click.echo(f"sweep: {len(samples)} questions x react and single, scored against their answers", err=as_json)
    with tempfile.TemporaryDirectory(prefix="covey-demo-sweep-") as directory:
        grid = Path(directory) / "grid.toml"
        grid.write_text(DEMO_GRID)
        outcome = run_sweep(
            samples, load_grid(grid), Path(directory) / "out", settings=settings, max_in_flight=4, queue=settings.queue
        )
        log = ResultsLog(outcome.directory)
        try:
            return table(summarize(log.records()))
        finally:
            log.close()


def _worker_env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COVEY_BROKER_URL", "COVEY_RESULT_BACKEND")}
    env["COVEY_REDIS_URL"] = settings.redis_url
    return env


def _show_tail(log: IO[bytes]) -> None:
    size = log.seek(0, os.SEEK_END)
    log.seek(max(0, size - LOG_TAIL_BYTES))
    tail = log.read().decode(errors="replace").strip()
    if tail:
        click.echo(f"the worker's log ended with:\n{tail}", err=True)


def _stop(worker: subprocess.Popen) -> None:
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
