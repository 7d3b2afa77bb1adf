"""An upgrade keeps the jobs in flight: a tree started on a worker of the previous
release (this repository at ``PREVIOUS``, the last commit whose checkpoints are of
format 2), whose worker is stopped mid-tree with agents waiting on checkpoints it
wrote, is finished by a worker of this release, charged as the ledger says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from covey import keys
from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import ROOT, start_worker, stop_worker, wait_for_worker, worker_env, worker_log
from tests.integration.test_durability import assert_charged_once, wait_until
from tests.redis_server import RedisServer

PREVIOUS = "d920a85ddeb267efe87811e15d8c03feb6348f43"  # 2026-12-05, checkpoint format 2
TASK = "[sim:spawn width=3 depth=2] [sim:latency 1500] upgrade me"
AGENTS = 13
SECONDS = 120


def previous_release(into: Path) -> Path:
    """This repository's tree at ``PREVIOUS``, unpacked into ``into``."""
    archive = into / "previous.tar"
    subprocess.run(["git", "archive", "--output", str(archive), PREVIOUS], cwd=ROOT, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "covey", filter="data")
    return into / "covey"


def run_previous(tree: Path, url: str, *args: str) -> subprocess.Popen:
    """``covey ARGS`` of the previous release (its package first on the path)."""
    log = worker_log("covey-previous")
    proc = subprocess.Popen(
        [sys.executable, "-m", "covey", *args],
        env=worker_env(url, PYTHONPATH=str(tree)),
        cwd=tree,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    proc.log_path = Path(log.name)
    return proc


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="the previous release comes from this clone's history")
def test_a_tree_the_previous_release_left_waiting_is_finished_by_this_one():
    with RedisServer() as server, tempfile.TemporaryDirectory() as directory:
        tree = previous_release(Path(directory))
        client = Client(Settings(redis_url=server.url))
        old = run_previous(tree, server.url, "worker", "--concurrency", "4", "--processes", "1", "--pool", "threads")
        new = None
        try:
            wait_for_worker(client, old)
            sent = subprocess.run(
                [sys.executable, "-m", "covey", "submit", TASK, "--max-depth", "3"],
                env=worker_env(server.url, PYTHONPATH=str(tree)),
                cwd=tree,
                capture_output=True,
                text=True,
                check=True,
            )
            handle = client.job(sent.stdout.strip())
            wait_until(lambda: sum(n.final for n in handle.tree()) >= 2, "two leaves finished", SECONDS)
            os.kill(old.pid, signal.SIGTERM)  # as an upgrade stops it: its running steps end, the rest wait
            assert old.wait(timeout=SECONDS) == 0
            left = [client.redis.hget(k, "state") for k in client.redis.scan_iter(keys.checkpoint(handle.id, "*"))]
            assert left and all('"format": 2' in state for state in left), "no agent left waiting on an old checkpoint"
            assert not all(n.final for n in handle.tree())

            new = start_worker(server.url, concurrency=4)
            result = handle.result(timeout=SECONDS)
            assert result.ok, result.error
            assert result.output == "leaves=9"
            assert len(handle.tree()) == AGENTS and all(n.status == "completed" for n in handle.tree())
            assert_charged_once(client, handle, result)
            assert client.redis.keys(keys.checkpoint(handle.id, "*")) == []
            assert "checkpoint refused" not in new.log_path.read_text()
        finally:
            for worker in (old, new):
                if worker is not None:
                    stop_worker(worker)
            client.close()
