"""Celery's own command line finds covey's app: ``celery -A covey worker`` serves
covey jobs and ``celery -A covey inspect ...`` reaches covey's workers."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import ROOT, stop_worker, worker_env


def celery(redis_url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "celery", "-A", "covey", *args],
        env=worker_env(redis_url),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_celery_inspect_reaches_a_covey_worker(redis_server, worker):
    ping = celery(redis_server.url, "inspect", "ping", "--timeout", "2")
    assert ping.returncode == 0, ping.stderr
    assert "pong" in ping.stdout
    active = celery(redis_server.url, "inspect", "active", "--timeout", "2")
    assert active.returncode == 0, active.stderr
    assert "celery@" in active.stdout


@pytest.mark.slow
def test_celery_worker_on_covey_serves_covey_jobs(redis_server, tmp_path):
    queue = f"covey-celery-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "covey",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            "1",
            "--hostname",
            f"{queue}@%h",
            "--loglevel",
            "warning",
        ],
        env=worker_env(redis_server.url, COVEY_QUEUE=queue),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = Client(Settings(redis_url=redis_server.url, queue=queue, model="sim"))
    try:
        # it reads COVEY_QUEUE without a -Q (the session's worker may answer pings meanwhile)
        deadline = time.monotonic() + 60
        while not client.queue_has_worker(timeout=1):
            assert proc.poll() is None and time.monotonic() < deadline, "celery -A covey worker never read its queue"
        result = client.run("What is 6 * 7?", timeout=60)
        assert result.ok and result.output == "42"
    finally:
        stop_worker(proc)
        client.close()
