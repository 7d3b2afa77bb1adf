"""What the CLI takes in and gives out: tasks from stdin or a file, tools, JSON on
every command, honest cancels and waits that say what they wait for."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from celery import Celery

from covey import keys
from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import ROOT, default_ctrl_c, start_worker, stop_worker, wait_for_worker, worker_env
from tests.redis_server import RedisServer


def test_a_task_read_from_standard_input_runs(cli):
    proc = cli("run", "-", "--json", stdin="What is 20 + 22?\n")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["output"] == "42"


def test_a_task_file_and_a_tool_list_shape_the_job(cli, client, tmp_path):
    task = tmp_path / "task.txt"
    task.write_text("What is 6 * 7?")
    submitted = cli("submit", "--task-file", str(task), "--tools", "calculator, read_file", "--json")
    job_id = json.loads(submitted.stdout)["job_id"]
    assert client.job(job_id).result(timeout=60).output == "42"
    root = client.job(job_id).ledger().agents[0]
    assert root.tools == ["calculator", "read_file"]
    status = json.loads(cli("status", job_id, "--json").stdout)
    assert status == {"job_id": job_id, "status": "completed", "stuck": None, "waits": []}


def test_cancelling_a_finished_job_says_so_and_exits_1(cli, client):
    handle = client.submit(client.spec("What is 1 + 1?"))
    handle.result(timeout=60)
    proc = cli("cancel", handle.id)
    assert proc.returncode == 1
    assert f"job {handle.id} already finished (completed); nothing to cancel" in proc.stderr
    assert not client.cancels.job_cancelled(handle.id)


def test_a_job_sent_to_celerys_default_queue_is_found_there_and_named(cli, client, redis_server):
    bare = Celery("elsewhere", broker=redis_server.url, backend=redis_server.url)
    bare.conf.update(task_serializer="json", accept_content=["json"])
    sent = bare.send_task("covey.run_job", kwargs={"spec": {"task": "What is 1 + 1?"}})  # no queue="covey"
    try:
        status = cli("status", sent.id)
        assert (status.returncode, status.stdout.strip()) == (0, "queued")
        assert f"job {sent.id} waits in queue 'celery', which no covey worker reads" in status.stderr
        waited = cli("result", sent.id, "--timeout", "1")
        assert waited.returncode == 3
        assert "send with queue='covey'" in waited.stderr
    finally:
        client.redis.delete("celery")  # this test's own Redis
        bare.close()


@pytest.mark.slow
def test_a_wait_on_a_job_whose_worker_died_names_the_stalled_agents(tmp_path):
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        worker = start_worker(server.url)
        wait_for_worker(client, worker)
        handle = client.submit(client.spec("[sim:latency 60000] What is 1 + 1?"))
        deadline = time.monotonic() + 60
        while (node := client.tree.node(handle.id, "root")) is None or node.status != "running":
            assert time.monotonic() < deadline, "the root never started"
            time.sleep(0.05)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        env = {k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}
        proc = subprocess.run(
            [sys.executable, "-m", "covey", "result", handle.id, "--timeout", "4"],
            env={**env, "COVEY_REDIS_URL": server.url},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 3
        assert "stopped reporting (no worker answers): root;" in proc.stderr
        assert "next message is held unacknowledged by worker" in proc.stderr  # the dead worker's delivery
        assert "a live worker puts it back" in proc.stderr
        assert re.search(r"not finished after \d+\.\ds", proc.stderr)  # the time it really waited
        assert client.redis.exists(keys.nodes(handle.id))
        stop_worker(worker)


def test_ctrl_c_on_run_says_the_job_goes_on_and_how_to_cancel_it_and_exits_130(client, redis_server):
    proc = subprocess.Popen(
        # 20 calls of half a second: a test runner slowed by a busy machine still signals it mid-run.
        [sys.executable, "-m", "covey", "run", "[sim:loop] [sim:latency 500] keep going"],
        env=worker_env(redis_server.url),
        cwd=ROOT,
        preexec_fn=default_ctrl_c,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    job_id = proc.stderr.readline().split()[1]  # "job <id>", printed once the job is sent
    deadline = time.monotonic() + 60
    while client.job(job_id).status() not in ("running", "waiting"):
        assert proc.poll() is None and time.monotonic() < deadline, "the job never started"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == (
        f"interrupted: job {job_id} goes on: `covey cancel {job_id}` stops it, `covey result {job_id}` waits again"
    )
    assert not client.job(job_id).status().final  # it went on
    client.job(job_id).cancel()
    assert client.job(job_id).result(timeout=60).status == "cancelled"


@pytest.mark.slow
def test_a_wait_on_a_job_whose_queue_lost_its_workers_names_the_queue_its_agents_wait_in():
    """The only worker reading queue ``gone`` dies right after the root sent its two
    children there (``after_send:kill:1``); another worker, reading the default
    queues, lives on and answers. The children wait in ``gone``, and the wait says so."""
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url, queue="gone"))
        dying = start_worker(server.url, COVEY_QUEUE="gone", COVEY_FAULT="after_send:kill:1")
        wait_for_worker(client, dying)
        handle = client.submit(client.spec("[sim:spawn width=2 depth=1] go", budget={"max_depth": 1}))
        assert dying.wait(timeout=120) == -9, "the worker was not killed at its fault"
        other = start_worker(server.url)
        try:
            wait_for_worker(client, other)
            env = {k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}
            proc = subprocess.run(
                [sys.executable, "-m", "covey", "result", handle.id, "--timeout", "2"],
                env={**env, "COVEY_REDIS_URL": server.url, "COVEY_QUEUE": "gone"},
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            stop_worker(other)
    assert proc.returncode == 3, proc.stderr
    assert f"agents of job {handle.id} wait in queue 'gone', which no covey worker reads: root-sub-" in proc.stderr
    assert "they start once one does (covey worker --queues gone)" in proc.stderr
