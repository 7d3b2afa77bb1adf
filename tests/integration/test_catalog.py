"""The catalog is the workers': what a live worker serves is in Redis while it runs
and gone once it stops; `covey tools` and `covey models` read it; a tool no worker
serves is refused by the client at submit and by the worker itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import redis
from celery import Celery

from covey.client import Client
from covey.client.errors import JobRefused
from covey.config.settings import Settings
from covey.spec import InvalidSpec
from covey.status import CauseKind
from covey.store.catalog import WorkerEntry
from covey.worker.catalog import served_tools
from tests.broker_queues import queue_length
from tests.integration.conftest import ROOT, served_over_http, start_covey_worker, stop_worker, wait_for_worker
from tests.redis_server import RedisServer

TTL = "1.5"  # seconds: an entry lapses this long after its worker's last heartbeat
WORKER = "catalog-a@test"
UNSERVED = "lookup_weather"
TOOLS = {t.name: t for t in served_tools()}  # what a worker with no tools of a user's serves
SERVED = ", ".join(sorted(TOOLS))


def worker_flags(hostname: str, queues: str = "covey,covey-sweeps", pool: str = "threads") -> list[str]:
    concurrency = "2" if pool == "prefork" else "1"
    return ["--processes", "1", "--pool", pool, "--concurrency", concurrency, "--hostname", hostname, "-Q", queues]


def published(client: Client, worker: str, seconds: float = 60) -> WorkerEntry:
    """The worker's entry, once it publishes one."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = [e for e in client.catalog.entries() if e.worker == worker]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"{worker} published no catalog entry in {seconds}s")


def covey(redis_url: str, *args: str) -> subprocess.CompletedProcess:
    """The real CLI, with no COVEY_* of the worker's (no models file: its own machine's view is only sim)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}
    env["COVEY_REDIS_URL"] = redis_url
    return subprocess.run(
        [sys.executable, "-m", "covey", *args], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A Redis of its own with one worker serving the built-ins and, through a models file, `simhttp` and `nokey`."""
    with RedisServer() as server:
        env = {**served_over_http(tmp_path_factory.mktemp("models"), "http://127.0.0.1:9/v1"), "COVEY_CATALOG_TTL": TTL}
        proc = start_covey_worker(server.url, worker_flags(WORKER), **env)
        client = Client(Settings(redis_url=server.url, catalog_ttl=float(TTL)))
        try:
            wait_for_worker(client, proc)
            published(client, WORKER)
            yield server, client
        finally:
            client.close()
            stop_worker(proc)


def test_a_running_worker_publishes_its_queues_tools_and_models(served):
    _, client = served
    entry = published(client, WORKER)
    assert entry.queues == ["covey", "covey-sweeps"]
    assert [t.name for t in entry.tools] == list(TOOLS)
    assert {t.origin for t in entry.tools} == {"builtin"}
    assert entry.model_names() == {"sim", "simhttp", "nokey"}


def test_a_killed_workers_entry_lapses_with_its_heartbeat(served):
    server, client = served
    proc = start_covey_worker(server.url, worker_flags("killed@test", "covey-killed"), COVEY_CATALOG_TTL=TTL)
    try:
        assert published(client, "killed@test").queues == ["covey-killed"]
    finally:
        proc.send_signal(signal.SIGKILL)  # no shutdown runs: only the TTL takes the entry away
        proc.wait()
    deadline = time.monotonic() + 60
    while any(e.worker == "killed@test" for e in client.catalog.entries()):
        assert time.monotonic() < deadline, "the killed worker's entry is still listed"
        time.sleep(0.1)
    assert [e.worker for e in client.catalog.entries()] == [WORKER]


@pytest.mark.parametrize("pool", ["threads", "prefork"])
@pytest.mark.slow
def test_a_worker_stopped_cleanly_withdraws_its_entry_at_once(served, pool):
    server, client = served
    name = f"stopped-{pool}@test"
    proc = start_covey_worker(server.url, worker_flags(name, f"covey-{pool}", pool), COVEY_CATALOG_TTL="600")
    try:
        assert published(client, name).queues == [f"covey-{pool}"]
    finally:
        stop_worker(proc)
    assert proc.returncode == 0
    assert name not in [e.worker for e in client.catalog.entries()]  # no TTL to wait out


def test_covey_tools_lists_each_tool_with_the_workers_serving_it(served):
    server, _ = served
    listed = covey(server.url, "tools", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [r["name"] for r in rows] == sorted(TOOLS)
    calculator = next(r for r in rows if r["name"] == "calculator")
    assert calculator["origin"] == "builtin" and calculator["workers"] == [WORKER]
    assert calculator["description"] == TOOLS["calculator"].description
    assert calculator["queues"] == ["covey", "covey-sweeps"] and len(calculator["digest"]) == 16
    text = covey(server.url, "tools")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0].split() == ["tool", "origin", "description", "workers"]
    assert any(line.startswith("calculator") and line.endswith(WORKER) for line in text.stdout.splitlines())


def test_covey_tools_and_models_say_so_when_no_worker_publishes():
    with RedisServer() as empty:
        tools = covey(empty.url, "tools", "--json")
        models = covey(empty.url, "models", "--json")
    assert (tools.returncode, json.loads(tools.stdout)) == (0, [])
    assert tools.stderr.strip() == "no worker is publishing its catalog: start one with `covey worker`"
    assert models.returncode == 0, models.stderr
    assert models.stderr.strip() == (
        "no worker is publishing its catalog; showing what a worker started with this machine's settings would serve"
    )
    assert [(r["name"], r["workers"]) for r in json.loads(models.stdout)] == [("sim", None)]


def test_covey_models_shows_what_the_live_worker_serves(served):
    """This machine has no models file: `simhttp` and `nokey` are the worker's."""
    server, _ = served
    listed = covey(server.url, "models", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert set(rows) == {"sim", "simhttp", "nokey"}
    assert (rows["simhttp"]["endpoint"], rows["simhttp"]["key_set"], rows["simhttp"]["workers"]) == (
        "http://127.0.0.1:9/v1",
        True,
        [WORKER],
    )
    assert rows["nokey"]["key_set"] is False
    assert "unused" not in listed.stdout  # the key's value, never published
    text = covey(server.url, "models")
    assert any(line.startswith("simhttp") and line.endswith(WORKER) for line in text.stdout.splitlines())


def test_a_spec_naming_a_tool_no_worker_serves_is_refused_at_submit(served):
    server, client = served
    queued = queue_length(client.redis, "covey")
    with pytest.raises(InvalidSpec) as e:
        client.submit(client.spec("What is 6 * 7?", tools=["calculator", UNSERVED]))
    assert str(e.value) == (
        f"invalid job spec: tool {UNSERVED!r} is served by no worker on queue 'covey'; served: {SERVED}"
    )
    assert queue_length(client.redis, "covey") == queued
    run = covey(server.url, "run", "--tools", f"calculator,{UNSERVED}", "What is 6 * 7?")
    assert run.returncode == 2
    assert run.stderr.strip() == f"Error: {e.value}"


@pytest.fixture
def bare(served):
    """A Celery client that knows nothing of covey but the broker and the task name."""
    server, _ = served
    app = Celery("elsewhere", broker=server.url, backend=server.url)
    app.conf.update(task_serializer="json", accept_content=["json"], result_accept_content=["json"])
    app.conf.task_default_queue = "covey"
    yield app
    app.close()


def test_the_worker_refuses_a_tool_no_worker_serves_when_the_client_is_bypassed(served, bare):
    _, client = served
    sent = bare.send_task("covey.run_job", kwargs={"spec": {"task": "What is 6 * 7?", "tools": [UNSERVED]}})
    sent.get(timeout=60, propagate=False)
    assert sent.state == "FAILURE"
    message = f"invalid job spec: tool {UNSERVED!r} is served by no worker on queue 'covey'; served: {SERVED}"
    assert str(sent.result) == message
    job = client.job(sent.id)
    assert job.status() == "refused" and job.tree() == []
    with pytest.raises(JobRefused) as e:
        job.result(timeout=30)
    assert (str(e.value), e.value.cause.kind) == (message, CauseKind.INVALID_SPEC)

    served_only = bare.send_task("covey.run_job", kwargs={"spec": {"task": "What is 6 * 7?", "tools": ["calculator"]}})
    result = served_only.get(timeout=60)
    assert (result["status"], result["output"]) == ("completed", "42")


def test_a_sweep_is_checked_against_the_models_the_workers_serve(served, tmp_path):
    """`simhttp` is served by the worker only; a typo of it is refused before anything is enqueued."""
    server, _ = served
    data, grid = tmp_path / "d.jsonl", tmp_path / "g.toml"
    data.write_text(json.dumps({"id": 1, "input": "What is 1 + 1?", "target": 2}) + "\n")
    grid.write_text('models = ["simhtp"]\nstrategies = ["single"]\n')
    queued = queue_length(redis.Redis.from_url(server.url), "covey-sweeps")
    refused = covey(server.url, "sweep", str(data), "--grid", str(grid), "--out", str(tmp_path / "out"))
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "Error: g.toml: configuration simhtp/single: model 'simhtp' is served by no worker on queue "
        "'covey-sweeps'; served: nokey, sim, simhttp; did you mean 'simhttp'?"
    )
    assert queue_length(redis.Redis.from_url(server.url), "covey-sweeps") == queued
