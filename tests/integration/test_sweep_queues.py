"""Which queues a default ``covey worker`` reads, and in what order: sweeps and
interactive jobs share it, and neither waits for the other's backlog; a worker
reading only the sweeps' queue runs their sub-agents too; and a sweep cut short
by its timeout says why its jobs do not move."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from covey import keys
from covey.cli.sweep import UNREAD_EVERY_SECONDS
from covey.client import Client
from covey.config.settings import Settings
from tests.broker_queues import queue_length
from tests.integration.conftest import ROOT, start_covey_worker, stop_worker, wait_for_worker, worker_env
from tests.redis_server import RedisServer


def covey(redis_url: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "covey", *args],
        env=worker_env(redis_url),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def sweep_files(tmp_path, n: int, directives: str = "", strategy: str = "single") -> tuple[str, str]:
    data, grid = tmp_path / "d.jsonl", tmp_path / "g.toml"
    data.write_text(
        "".join(
            json.dumps({"id": i, "input": f"{directives}What is {i} + 1?", "target": i + 1}) + "\n" for i in range(n)
        )
    )
    grid.write_text(f'strategies = ["{strategy}"]\nscorer = "numeric"\n')
    return str(data), str(grid)


@pytest.mark.slow
def test_an_interactive_job_sent_after_a_sweep_backlog_runs_before_it(tmp_path):
    """A sweep fills ``covey-sweeps`` while no worker runs, then ``covey submit``
    sends one job to ``covey``. A default worker with one slot reads ``covey``
    first (kombu's Redis transport pops the queues in the order given, rotating
    the one that delivered to the back, and a slot prefetches one message), so the
    interactive job starts before all but at most one of the sweep's jobs."""
    with RedisServer() as server:
        data, grid = sweep_files(tmp_path, 8)
        out = tmp_path / "out"
        sweep = covey(server.url, "sweep", data, "--grid", grid, "--out", str(out), "--max-in-flight", "8")
        settings = Settings(redis_url=server.url)
        sweeps = Client(settings.model_copy(update={"queue": settings.sweep_queue}))
        deadline = time.monotonic() + 60
        while queue_length(sweeps.redis, settings.sweep_queue) < 8:
            assert sweep.poll() is None, sweep.communicate()
            assert time.monotonic() < deadline, "the sweep did not queue its 8 jobs within 60 s"
            time.sleep(0.05)
        submitted = covey(server.url, "submit", "What is 6 * 7?")
        job_id = submitted.communicate(timeout=60)[0].strip()
        worker = start_covey_worker(server.url, ["--processes", "1", "--concurrency", "1", "--loglevel", "info"])
        try:
            client = Client(settings)
            wait_for_worker(client, worker)
            interactive = client.job(job_id).result(timeout=120)
            _, stderr = sweep.communicate(timeout=120)
            assert sweep.returncode == 0, stderr
            ids = [json.loads(line)["job_id"] for line in (out / "results.jsonl").read_text().splitlines()]
            started = [sweeps.job(i).result(timeout=10).started_at for i in ids]
        finally:
            stop_worker(worker)
        assert interactive.ok
        assert sum(1 for s in started if s < interactive.started_at) <= 1


def test_a_sweep_whose_queue_no_worker_reads_says_so_and_exits_3_after_its_timeout(tmp_path):
    with RedisServer() as server:
        data, grid = sweep_files(tmp_path, 2)
        seconds = str(int(UNREAD_EVERY_SECONDS + 2))  # past the first time it says so again
        sweep = covey(server.url, "sweep", data, "--grid", grid, "--out", str(tmp_path / "out"), "--timeout", seconds)
        _, stderr = sweep.communicate(timeout=60)
    assert sweep.returncode == 3, stderr
    lines = stderr.strip().splitlines()
    assert lines[0] == "warning: no worker reads queue covey-sweeps: start one with `covey worker`"
    # said again among the progress lines, which scroll the first warning away
    assert "waiting: no worker reads queue covey-sweeps: start one with `covey worker`" in lines[1:-1]
    assert lines[-1].startswith("Error: sweep ") and f"2 of 2 units unfinished after {seconds}s" in lines[-1]
    assert lines[-1].endswith(
        "no worker reads queue covey-sweeps: start one with `covey worker`; rerun the same command to resume"
    )


def test_a_worker_reading_only_the_sweep_queue_runs_the_sweeps_sub_agents(tmp_path):
    """A sweep's jobs spawn sub-agents, on a worker started with ``--queues
    covey-sweeps`` alone and COVEY_QUEUE left at ``covey``: a job's agents follow
    it to the queue it was sent to, so none waits in ``covey``, which no worker
    reads here, and every unit completes with its whole tree."""
    with RedisServer() as server:
        data, grid = sweep_files(tmp_path, 3, "[sim:spawn width=2 depth=1] ", "react")
        flags = ["--processes", "1", "--concurrency", "4", "--queues", "covey-sweeps", "--loglevel", "info"]
        worker = start_covey_worker(server.url, flags)
        try:
            settings = Settings(redis_url=server.url)
            wait_for_worker(Client(settings.model_copy(update={"queue": settings.sweep_queue})), worker)
            out = tmp_path / "out"
            sweep = covey(server.url, "sweep", data, "--grid", grid, "--out", str(out), "--timeout", "60")
            _, stderr = sweep.communicate(timeout=120)
            left_in_covey = queue_length(Client(settings).redis, settings.queue)
        finally:
            stop_worker(worker)
    assert sweep.returncode == 0, stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["status"], r["usage"]["agents"]) for r in records] == [("completed", 2)] * 3  # 2 sub-agents each
    assert left_in_covey == 0


def test_a_sweep_whose_worker_stopped_says_at_its_timeout_that_its_agents_stopped_reporting(tmp_path):
    """The worker is stopped (SIGSTOP) with both jobs' roots in their model calls:
    the sweep's timeout line says why its oldest job does not move."""
    with RedisServer() as server:
        data, grid = sweep_files(tmp_path, 2, "[sim:latency 20000] ")
        worker = start_covey_worker(server.url, ["--processes", "1", "--concurrency", "4", "--loglevel", "info"])
        try:
            settings = Settings(redis_url=server.url)
            client = Client(settings.model_copy(update={"queue": settings.sweep_queue}))
            wait_for_worker(client, worker)
            sweep = covey(server.url, "sweep", data, "--grid", grid, "--out", str(tmp_path / "out"), "--timeout", "8")
            deadline = time.monotonic() + 60
            while len(client.redis.keys(keys.nodes("*"))) < 2:  # both roots recorded running
                assert sweep.poll() is None and time.monotonic() < deadline, sweep.communicate()
                time.sleep(0.05)
            os.kill(worker.pid, signal.SIGSTOP)
            _, stderr = sweep.communicate(timeout=120)
        finally:
            worker.kill()  # stopped or not; its calls would hold a graceful stop for 20 s
            worker.wait(timeout=30)
    assert sweep.returncode == 3, stderr
    assert "2 of 2 units unfinished after 8s: agents of job " in stderr
    assert "stopped reporting (no worker answers): root" in stderr
    assert stderr.rstrip().endswith("rerun the same command to resume")
