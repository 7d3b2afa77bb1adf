"""The worker's log lines, through a real worker on a Redis with a password and
an API key set: one JSON line per agent step and state change, one warning line
for an invalid spec, and no secret in any log line, result, tree or Flower field,
not even when the provider's error echoes the key, nor in ``covey models``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid

import httpx2 as httpx
import pytest
import redis

from covey import keys
from covey.client import Client
from covey.config.settings import Settings
from covey.models.sim.directives import ECHO_STYLES
from covey.status import AgentStatus
from tests.integration.conftest import (
    ROOT,
    SIMHTTP,
    start_covey_worker,
    start_flower,
    start_sim_server,
    start_worker,
    stop_worker,
    wait_for_worker,
    worker_env,
)
from tests.integration.test_durability import wait_until
from tests.redis_server import RedisServer

PASSWORD = f"redis-pw-{uuid.uuid4().hex}"
API_KEY = f"sk-test-{uuid.uuid4().hex}"
AUTH = ("ops", "flower-pw")


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """A Redis with a password, a worker logging JSON with an API key, and Flower;
    ``simhttp`` (``covey sim-server``) is called with that key, and the models file
    names an endpoint whose URL holds the Redis password."""
    with RedisServer(password=PASSWORD) as server:
        sim, base_url = start_sim_server(server.url)
        models = tmp_path_factory.mktemp("models") / "models.toml"
        models.write_text(
            f'[models.{SIMHTTP}]\nbase_url = "{base_url}"\napi_key_env = "SIMHTTP_KEY"\nmodel = "sim"\n\n'
            f'[models.private]\nbase_url = "https://ops:{PASSWORD}@models.internal/v1"\napi_key_env = "SIMHTTP_KEY"\n'
        )
        # Task events from the start (Flower starts beside the worker, so it cannot ask first),
        # and extended results: everything a secret could leak through is on.
        env = {
            "COVEY_OPENAI_API_KEY": API_KEY,
            "COVEY_LOG_FORMAT": "json",
            "COVEY_TASK_EVENTS": "1",
            "COVEY_MODELS": str(models),
            "SIMHTTP_KEY": API_KEY,
            "COVEY_TOOLS": "tests.integration.transcript_tools",  # reveal: a tool that leaks the key
            "PYTHONPATH": str(ROOT),
        }
        worker = start_worker(server.url, **env)
        client = Client(Settings(redis_url=server.url, model="sim"))
        flower, flower_url = start_flower(server.url, ":".join(AUTH), **env)
        try:
            wait_for_worker(client, worker)
            yield client, worker, flower_url, env
        finally:
            client.close()
            stop_worker(sim)
            stop_worker(flower)
            stop_worker(worker)
            worker.log_path.unlink(missing_ok=True)


def flower_tasks(url: str, job_id: str, seconds: float = 30) -> str:
    """Flower's view of every task of the job, once it lists them as finished."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            tasks = httpx.get(f"{url}/api/tasks", auth=AUTH, timeout=5).json()
        except (httpx.TransportError, ValueError):
            tasks = {}
        if any(job_id in json.dumps(t) and t.get("state") in ("SUCCESS", "FAILURE") for t in tasks.values()):
            return json.dumps(tasks)
        time.sleep(0.3)
    raise AssertionError(f"flower never listed job {job_id}")


def log_lines(worker) -> list[str]:
    return worker.log_path.read_text().splitlines()


def events(worker, job_id: str) -> list[dict]:
    found = []
    for line in log_lines(worker):
        if line.startswith("{") and job_id in line:
            record = json.loads(line)
            if "event" in record:
                found.append(record)
    return found


def finished_events(worker, job_id: str, seconds: float = 10) -> list[dict]:
    """The job's events once its root's "finished" line is written: the worker logs it
    just after the final record, which the client may read first."""
    deadline = time.monotonic() + seconds
    while True:
        found = events(worker, job_id)
        if any(e["agent"] == "root" and e["event"] == "finished" for e in found):
            return found
        assert time.monotonic() < deadline, f"no 'finished' line for job {job_id}'s root after {seconds:g}s"
        time.sleep(0.05)


def test_every_step_and_state_change_is_one_json_line_and_no_secret_leaks(guarded):
    client, worker, flower, _ = guarded
    handle = client.submit(client.spec("[sim:spawn width=2 depth=1] go", budget={"max_depth": 1}))
    result = handle.result(timeout=60)
    assert result.status is AgentStatus.COMPLETED
    seen = finished_events(worker, handle.id)
    assert {"job", "agent", "parent", "depth", "cycle", "tokens", "status"} <= set(seen[0])
    by_agent = {}
    for e in seen:
        by_agent.setdefault(e["agent"], []).append(e)
    assert set(by_agent) == {"root", *(c.agent_id for c in result.children)}
    root = by_agent["root"]
    assert (root[0]["event"], root[0]["status"]) == ("started", "running")
    assert [e["status"] for e in root if e["event"] in ("spawned 2", "resumed")] == ["waiting", "running"]
    assert (root[-1]["event"], root[-1]["status"], root[-1]["tokens"]) == (
        "finished",
        "completed",
        result.usage.total_tokens,
    )
    assert all(e["parent"] == "root" and e["depth"] == 1 for c in result.children for e in by_agent[c.agent_id])
    assert not [line for line in log_lines(worker) if "HTTP Request" in line]  # a model call is its event's line

    visible = "\n".join(
        [
            worker.log_path.read_text(),
            result.model_dump_json(),
            json.dumps([n.model_dump(mode="json") for n in handle.tree()]),
            flower_tasks(flower, handle.id),
        ]
    )
    for secret in (PASSWORD, API_KEY):
        assert secret not in visible


def test_an_invalid_spec_is_one_warning_line_without_a_traceback(guarded):
    client, worker, _, _ = guarded
    sent = client.app.send_task("covey.run_job", kwargs={"spec": {"task": "x", "max_cycles": "many"}})
    with pytest.raises(Exception, match="max_cycles"):
        sent.get(timeout=60)
    time.sleep(0.5)  # the worker writes its log line after the result
    about = [json.loads(line) for line in log_lines(worker) if line.startswith("{") and sent.id in line]
    assert [r["level"] for r in about if r["level"] != "INFO"] == ["WARNING"]
    assert "max_cycles" in next(r["message"] for r in about if r["level"] == "WARNING")
    assert "Traceback" not in worker.log_path.read_text()


def leaked(visible: str) -> list[str]:
    """The pieces (12 characters) of the key's random part found in ``visible``, however
    split by whitespace, quotes or escaped line ends, and whatever their case."""
    squeezed = re.sub(r"""\\[nrt]|[\s"'`+\\]""", "", visible).lower()
    part = API_KEY.removeprefix("sk-test-")
    return [part[i : i + 12] for i in range(len(part) - 11) if part[i : i + 12] in squeezed]


@pytest.mark.parametrize("echo", sorted(ECHO_STYLES))
def test_a_provider_error_echoing_the_key_reaches_no_result_tree_log_or_flower(guarded, echo):
    client, worker, flower, _ = guarded
    handle = client.submit(client.spec(f"[sim:fail 401] [sim:echo {echo}] What is 1 + 1?", model=SIMHTTP))
    result = handle.result(timeout=60)
    assert result.status is AgentStatus.FAILED
    assert result.error.startswith(
        "model call failed: HTTP 401: sim: scripted auth failure: Incorrect API key provided: "
    )
    assert "***" in result.error
    visible = surfaces(client, worker, flower, handle, result)
    assert not leaked(visible)
    assert "model call failed" not in worker.log_path.read_text()


def test_a_model_repeating_the_key_a_tool_gave_it_reaches_no_surface(guarded):
    """The tool leaks the key to the model, which answers with it: masked in the
    answer as in the transcript."""
    client, worker, flower, _ = guarded
    handle = client.submit(client.spec('Reveal it. [sim:call reveal {"name": "SIMHTTP_KEY"}]', tools=["reveal"]))
    result = handle.result(timeout=60)
    assert (result.status, result.output) == (AgentStatus.COMPLETED, "***")
    assert not leaked(surfaces(client, worker, flower, handle, result))


def surfaces(client: Client, worker, flower: str, handle, result) -> str:
    """Everything a person reads of the job: the worker's log, the result, Celery's
    result meta, the tree, the transcripts and Flower's rows."""
    # Celery logs a task's line once its result is stored, so a client may read the result first.
    ended = (f"Task covey.run_job[{handle.id}] succeeded in ", f"Task covey.run_job[{handle.id}] ended: ")
    wait_until(lambda: any(line in worker.log_path.read_text() for line in ended), "Celery's line for the task")
    r = redis.Redis.from_url(client.settings.redis_url, decode_responses=True)
    try:
        meta = r.get(f"celery-task-meta-{handle.id}")
        kept = [v for key in r.scan_iter(keys.transcript(handle.id, "*")) for v in r.hvals(key)]
    finally:
        r.close()
    assert kept, "no transcript kept"
    return "\n".join(
        [
            worker.log_path.read_text(),
            result.model_dump_json(),
            meta,
            json.dumps([n.model_dump(mode="json") for n in handle.tree()]),
            *kept,
            flower_tasks(flower, handle.id),
        ]
    )


def test_covey_models_shows_no_password_in_an_endpoint(guarded):
    client, _, _, env = guarded
    env = worker_env(client.settings.redis_url, **env)
    for args in ((), ("--json",)):
        listed = subprocess.run(
            [sys.executable, "-m", "covey", "models", *args],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert listed.returncode == 0, listed.stderr
        assert "https://ops:***@models.internal/v1" in listed.stdout
        assert PASSWORD not in listed.stdout


def banner(lines: list[str]) -> list[str]:
    [record] = [json.loads(line) for line in lines if '"worker_starting"' in line][:1]
    return record["banner"]


def test_the_banner_names_a_brokers_password_only_masked(guarded):
    client, worker, _, _ = guarded
    host = client.settings.redis_url.rpartition("@")[2]
    assert f".> transport:   redis://:**@{host}" in banner(log_lines(worker))


@pytest.mark.slow
def test_under_json_every_line_a_worker_writes_is_json_from_its_banner_to_its_shutdown():
    with RedisServer() as server:  # of its own: the job is this worker's, not another's
        # Every other default; the metrics endpoint's port, for the line naming it.
        worker = start_covey_worker(server.url, ["--metrics-port", "0"], COVEY_LOG_FORMAT="json")
        client = Client(Settings(redis_url=server.url))
        try:
            wait_for_worker(client, worker)
            assert client.run(client.spec("What is 6 * 7?"), timeout=60).ok
        finally:
            client.close()
            stop_worker(worker)
    lines = [line for line in log_lines(worker) if line.strip()]
    not_json = [line for line in lines if not _is_json(line)]
    assert not not_json, not_json[:5]
    assert f".> transport:   {server.url}" in banner(lines)
    assert any(json.loads(line).get("message", "").startswith("worker: Warm shutdown") for line in lines)
    assert any(json.loads(line).get("message", "").startswith("covey worker: metrics on http://") for line in lines)


def _is_json(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False
