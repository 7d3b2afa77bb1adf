"""``covey demo``: covey's main job on the embedded default, with no setup.

It starts a real worker process (concurrency 1, to show that waiting parents hold
no slot), runs a sim agent tree on the local Redis, prints the result and the tree,
and stops the worker.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile

import click

from covey import render

DEMO_TIMEOUT_SECONDS = 120


def run_demo(width: int, depth: int, as_json: bool = False) -> int:
    """Run the demo; with ``as_json`` the result and tree are printed as one JSON
    document and the narration goes to standard error."""
    from covey.client import Client

    client = Client()
    client.redis.ping()  # fail fast, with the CLI's Redis error, before starting a worker
    log = tempfile.NamedTemporaryFile(prefix="covey-demo-worker-", suffix=".log", delete=False)
    worker = subprocess.Popen(
        [sys.executable, "-m", "covey", "worker", "--concurrency", "1", "--loglevel", "warning"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    click.echo(f"worker started (concurrency 1), log: {log.name}", err=as_json)
    try:
        task = f"[sim:spawn width={width} depth={depth}] survey the field"
        handle = client.submit(client.spec(task, budget={"max_depth": depth + 1}))
        click.echo(f"job {handle.id}: {task}", err=as_json)
        result = handle.result(timeout=DEMO_TIMEOUT_SECONDS)
        if as_json:
            nodes = [n.model_dump(mode="json") for n in handle.tree()]
            click.echo(json.dumps({"result": result.model_dump(mode="json"), "nodes": nodes}, indent=2))
        else:
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
