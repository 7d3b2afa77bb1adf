"""One worker, two endpoints: the in-process ``sim`` and ``covey sim-server`` under
another name, through a models file; a model no endpoint serves is refused."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import httpx2
import pytest

from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentTerms
from covey.client import Client
from covey.client.errors import JobRefused
from covey.config.settings import Settings
from covey.context import RunContext
from covey.models.catalog import Catalog, ModelParams
from covey.models.llm import LLM
from covey.spec import AgentSpec, InvalidSpec
from covey.worker import loop
from covey.worker.deps import Deps
from tests.integration.conftest import (
    ROOT,
    SIMHTTP,
    calls_reaching,
    served_over_http,
    start_sim_server,
    start_worker,
    stop_worker,
    wait_for_worker,
    worker_env,
)
from tests.models.test_catalog import Captured
from tests.redis_server import RedisServer, refusing_port

QUEUE = "covey-models"


@pytest.fixture(scope="module")
def redis_server():
    """This module's own Redis: ``covey models`` lists every live worker on it, and the
    session's may have one serving ``sim`` alone, whose ping also ends a wait for ours."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="module")
def two_endpoints(redis_server, tmp_path_factory):
    server, base_url = start_sim_server(redis_server.url)
    with refusing_port() as down:
        env = {**served_over_http(tmp_path_factory.mktemp("models"), base_url, down), "COVEY_QUEUE": QUEUE}
        worker = start_worker(redis_server.url, **env)
        client = Client(Settings(redis_url=redis_server.url, queue=QUEUE))
        try:
            wait_for_worker(client, worker)
            yield client, base_url, env
        finally:
            client.close()
            stop_worker(worker)
            stop_worker(server)


def test_one_worker_runs_a_job_on_each_endpoint(two_endpoints):
    client, base_url, _ = two_endpoints
    in_process = client.submit(client.spec("What is 6 * 7?", model="sim")).result(timeout=60)
    assert in_process.ok and in_process.output == "42", in_process.error
    assert calls_reaching(base_url) == 0

    over_http = client.submit(client.spec("What is 6 * 7?", model=SIMHTTP)).result(timeout=60)
    assert over_http.ok and over_http.output == "42", over_http.error
    assert calls_reaching(base_url) == over_http.usage.cycles == 2


def test_covey_models_lists_both(two_endpoints, redis_server):
    _, base_url, env = two_endpoints
    listed = subprocess.run(
        [sys.executable, "-m", "covey", "models", "--json"],
        env=worker_env(redis_server.url, **env),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["sim"]["endpoint"] == "in-process"
    assert (rows[SIMHTTP]["endpoint"], rows[SIMHTTP]["model"], rows[SIMHTTP]["key_set"]) == (base_url, "sim", True)
    assert rows["nokey"]["key_set"] is False
    assert "unused" not in listed.stdout  # the key's value, never shown


@pytest.mark.parametrize(
    "budget, spent, short",
    [
        ({"max_tokens": 400}, lambda u: u.total_tokens <= 400, "token budget"),
        ({"max_cost": 0.0005}, lambda u: u.cost_usd <= 0.0005, "cost budget"),
    ],
)
def test_a_server_ignoring_the_reply_cap_is_cut_where_the_budget_ends(two_endpoints, budget, spent, short):
    client, _, _ = two_endpoints
    task = "Write a long, detailed story about a dragon who learns to cook. [sim:tokens 5000] [sim:uncapped]"
    spec = client.spec(task, model=SIMHTTP, strategy="single", budget=budget)
    handle = client.submit(spec)
    result = handle.result(timeout=60)
    assert result.status == "budget_exceeded", result.error
    assert result.error.startswith("the model's reply was cut at ") and f"all the {short} had left" in result.error
    assert spent(result.usage), result.usage
    [root] = handle.tree()
    assert root.usage == result.usage  # what the ledger charged: the reservation, no more


def test_a_model_the_worker_cannot_serve_is_refused_and_runs_nothing(two_endpoints):
    client, base_url, _ = two_endpoints
    before = calls_reaching(base_url)
    handle = client.submit(client.spec("What is 1 + 1?", model="nokey"))  # listed, its key unset on the worker
    message = "model 'nokey': its key variable NOKEY_KEY is not set on this worker"
    with pytest.raises(JobRefused, match=re.escape(f"invalid job spec: {message}")):
        handle.result(timeout=30)
    assert handle.status() == "refused"
    assert handle.tree() == []
    assert calls_reaching(base_url) == before


def test_a_model_no_worker_serves_is_refused_at_submit_with_the_closest_name(two_endpoints):
    client, base_url, _ = two_endpoints
    before = calls_reaching(base_url)
    said = "model 'simhtp' is served by no worker on queue 'covey-models'; served: "
    with pytest.raises(InvalidSpec, match=re.escape(said) + ".*" + re.escape("; did you mean 'simhttp'?")):
        client.submit(client.spec("What is 1 + 1?", model="simhtp"))
    assert calls_reaching(base_url) == before


def test_a_model_endpoint_nothing_answers_is_named_without_its_credentials(two_endpoints, redis_server):
    _, _, env = two_endpoints
    run = subprocess.run(
        [sys.executable, "-m", "covey", "run", "What is 1 + 1?", "--model", "down"],
        env=worker_env(redis_server.url, **env),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert run.returncode == 1, run.stderr
    port = re.search(r"127\.0\.0\.1:(\d+)", Path(env["COVEY_MODELS"]).read_text().split("[models.down]")[1])
    assert port is not None
    assert f"model unreachable at http://127.0.0.1:{port[1]}/v1: Connection error." in run.stdout + run.stderr
    assert "hunter2" not in run.stdout + run.stderr and "user" not in run.stdout + run.stderr


def test_a_jobs_model_params_reach_its_calls_and_its_children(redis_server, tmp_path):
    """Through the worker's loop: the root's request carries the job's parameters,
    and the children it spawns inherit them."""
    endpoint = Captured()
    models = served_over_http(tmp_path, "http://remote.example/v1")["COVEY_MODELS"]
    settings = Settings(redis_url=redis_server.url, model_retries=0, models=Path(models))
    deps = Deps.from_settings(settings)
    catalog = Catalog.from_settings(settings, environ={"SIMHTTP_KEY": "k"})
    deps.llm = LLM(settings, catalog, transport=httpx2.MockTransport(endpoint))
    params = ModelParams(temperature=0.3, seed=5)
    spec = AgentSpec(task="[sim:spawn width=2 depth=1] go", model=SIMHTTP, model_params=params)
    ctx = RunContext(job_id=f"params-{uuid.uuid4().hex}", agent_id="root", budget=Budget(max_depth=2))
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(max_cycles=spec.max_cycles))

    outcome = loop.advance(deps, *loop.begin(deps, ctx, spec))

    assert isinstance(outcome, loop.FanOut)
    [body] = endpoint.bodies()
    assert (body["model"], body["temperature"], body["seed"]) == ("sim", 0.3, 5)
    assert [child.model_params for _, child in outcome.children] == [params, params]


def test_a_json_object_model_answers_a_schema_through_the_worker(redis_server, tmp_path):
    """A model set to ``structured = "json_object"`` is asked for an object, shown the
    schema, and its reply is checked against it; the prompt reserved covers what was sent."""
    endpoint = Captured()
    models = Path(served_over_http(tmp_path, "http://remote.example/v1")["COVEY_MODELS"])
    models.write_text(models.read_text().replace('model = "sim"\n', 'model = "sim"\nstructured = "json_object"\n', 1))
    settings = Settings(redis_url=redis_server.url, model_retries=0, models=models)
    deps = Deps.from_settings(settings)
    deps.llm = LLM(
        settings,
        Catalog.from_settings(settings, environ={"SIMHTTP_KEY": "k"}),
        transport=httpx2.MockTransport(endpoint),
    )
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    spec = AgentSpec(task="What is 1 + 1?", model=SIMHTTP, strategy="single", options={"schema": schema})
    ctx = RunContext(job_id=f"jsonobj-{uuid.uuid4().hex}", agent_id="root", budget=Budget(max_tokens=10_000))
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(max_cycles=spec.max_cycles))

    outcome = loop.advance(deps, *loop.begin(deps, ctx, spec))

    assert isinstance(outcome, loop.Finished)
    assert (outcome.result.status, outcome.result.data) == ("completed", {"answer": "2"})
    [body] = endpoint.bodies()
    assert body["response_format"] == {"type": "json_object"} and json.dumps(schema) in body["messages"][-1]["content"]
    assert deps.ledger.snapshot(ctx.job_id).tokens_used == outcome.result.usage.total_tokens
