"""``covey demo``: covey's main job on the embedded default, with no setup.

It starts a real worker process (concurrency 1, to show that waiting parents hold
no slot), runs a sim agent tree on the local Redis, prints the result and the tree,
and stops the worker.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile

import click

from covey import render

DEMO_TIMEOUT_SECONDS = 120


def run_demo(width: int, depth: int) -> int:
    from covey.client import Client

    client = Client()
    client.redis.ping()  # fail fast, with the CLI's Redis error, before starting a worker
    log = tempfile.NamedTemporaryFile(prefix="covey-demo-worker-", suffix=".log", delete=False)
    worker = subprocess.Popen(
        [sys.executable, "-m", "covey", "worker", "--concurrency", "1", "--loglevel", "warning"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    click.echo(f"worker started (concurrency 1), log: {log.name}")
    try:
        task = f"[sim:spawn width={width} depth={depth}] survey the field"
        handle = client.submit(client.spec(task, budget={"max_depth": depth + 1}))
        click.echo(f"job {handle.id}: {task}")
        result = handle.result(timeout=DEMO_TIMEOUT_SECONDS)
        click.echo(render.result(result))
        click.echo()
        click.echo(render.tree(handle.tree()))
        return 0 if result.ok else 1
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
