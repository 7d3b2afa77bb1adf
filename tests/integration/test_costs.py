"""Budgets in dollars through the real CLI, worker and Redis: the sim priced by
COVEY_SIM_PRICE, and three models of ``covey sim-server`` priced in a models file."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import uuid
from collections import Counter
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from covey.budgets.prices import Price
from covey.client import Client
from covey.config.settings import Settings
from covey.sweeps import run_sweep
from tests.integration.conftest import (
    ROOT,
    start_sim_server,
    start_worker,
    stop_worker,
    wait_for_worker,
    worker_env,
)
from tests.redis_server import RedisServer

SIM_PRICE = {"input": 0.15, "cached_input": 0.075, "output": 0.6}
# USD per million tokens: the dearest costs ten times the cheapest.
PRICES = {"cheap": (1, 2), "mid": (3, 6), "dear": (10, 20)}
REPLY_CAP = 64  # every sweep call's max_call_tokens: bounds one call's worst case
MAX_PROMPT_BYTES = 400  # above any of these single-call prompts' byte bound (no tokenizer is named)


@pytest.fixture(scope="module")
def priced_redis():
    with RedisServer() as server:
        yield server


class Busy(BaseHTTPRequestHandler):
    """A server that is always busy: every request a 429, to come back at once."""

    asked = 0

    def do_POST(self) -> None:
        Busy.asked += 1
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = b'{"error": {"message": "busy: try again", "type": "rate_limit"}}'
        self.send_response(429)
        self.send_header("content-type", "application/json")
        self.send_header("retry-after", "0")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def busy_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()


@pytest.fixture(scope="module")
def models_env(priced_redis, busy_url, tmp_path_factory):
    server, base_url = start_sim_server(priced_redis.url)
    path = tmp_path_factory.mktemp("models") / "models.toml"
    path.write_text(
        "".join(
            f'[models.{name}]\nbase_url = "{base_url}"\napi_key_env = "SIMHTTP_KEY"\nmodel = "sim"\n'
            f"price = {{ input = {i}, output = {o} }}\n\n"
            for name, (i, o) in PRICES.items()
        )
        + f'[models.unpriced]\nbase_url = "{base_url}"\napi_key_env = "SIMHTTP_KEY"\nmodel = "sim"\n\n'
        # busy always answers 429; dear answers for it, at dear's price
        + f'[models.busy]\nbase_url = "{busy_url}"\napi_key_env = "SIMHTTP_KEY"\nmodel = "sim"\n'
        + 'price = { input = 1, output = 2 }\nfallbacks = ["dear"]\n\n'
        # backed answers for itself: its dear fallback is reserved for, never charged
        + f'[models.backed]\nbase_url = "{base_url}"\napi_key_env = "SIMHTTP_KEY"\nmodel = "sim"\n'
        + 'price = { input = 1, output = 2 }\nfallbacks = ["dear"]\n'
    )
    yield {"COVEY_MODELS": str(path), "SIMHTTP_KEY": "unused", "COVEY_SIM_PRICE": json.dumps(SIM_PRICE)}
    stop_worker(server)


@pytest.fixture(scope="module")
def priced_worker(priced_redis, models_env):
    proc = start_worker(priced_redis.url, concurrency=4, **models_env)
    wait_for_worker(Client(Settings(redis_url=priced_redis.url)), proc)
    yield proc
    stop_worker(proc)


@pytest.fixture
def covey(priced_redis, priced_worker, models_env):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "covey", *args],
            env=worker_env(priced_redis.url, **models_env),
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )

    return run


def test_a_job_is_charged_its_cost_and_shows_it_in_the_ledger_and_the_tree(covey):
    proc = covey("run", "What is 6 * 7?", "--strategy", "single", "--max-cost", "0.01", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    usage = result["usage"]
    assert usage["cycles"] == 1
    expected = Price.model_validate(SIM_PRICE).cost(usage["prompt_tokens"], usage["completion_tokens"])
    assert usage["cost_micros"] == expected > 0
    ledger = json.loads(covey("ledger", result["job_id"], "--json").stdout)
    assert (ledger["cost_used"], ledger["cost_limit"], ledger["cost_reserved"]) == (expected / 1e6, 0.01, 0)
    assert ledger["agents"][0]["cost_used"] == expected / 1e6
    tree = covey("tree", result["job_id"]).stdout
    assert tree.splitlines()[0].split()[4] == "cost" and f"${expected / 1e6:.6f}" in tree


def test_a_busy_models_fallback_answers_and_is_charged_at_its_own_price_within_the_cap(covey):
    asked = Busy.asked
    cap = 0.01
    proc = covey("run", "What is 6 * 7?", "--model", "busy", "--strategy", "single", "--max-cost", str(cap), "--json")
    assert proc.returncode == 0, proc.stdout
    result = json.loads(proc.stdout)
    assert (result["status"], result["output"]) == ("completed", "42")
    assert Busy.asked - asked == 3  # the first ask and the SDK's two retries, all 429
    usage = result["usage"]
    dear = Price(input=PRICES["dear"][0], output=PRICES["dear"][1])
    assert usage["cost_micros"] == dear.cost(usage["prompt_tokens"], usage["completion_tokens"]) > 0
    assert usage["cost_micros"] <= cap * 1e6
    shown = json.loads(covey("transcript", result["job_id"], "root", "--json").stdout)
    [call] = [e for e in shown["events"] if e["kind"] == "model"]
    assert (call["model"], call["answered_by"]) == ("busy", "dear")
    assert "busy, answered by its fallback dear" in covey("transcript", result["job_id"], "root").stdout


def test_a_model_with_a_dearer_fallback_that_answers_itself_is_charged_its_own_price(covey):
    proc = covey("run", "What is 6 * 7?", "--model", "backed", "--strategy", "single", "--max-cost", "0.01", "--json")
    assert proc.returncode == 0, proc.stdout
    usage = json.loads(proc.stdout)["usage"]
    own = Price(input=1, output=2)
    assert usage["cost_micros"] == own.cost(usage["prompt_tokens"], usage["completion_tokens"]) > 0


def test_a_cost_cap_shrinks_the_reply_and_is_never_overspent(covey):
    cap = 0.00006  # 60 micro-dollars: the prompt's worst case and a reply cut to what is left
    proc = covey("run", "[sim:tokens 500] [sim:answer long] talk", "--max-cost", str(cap), "--tools", "", "--json")
    result = json.loads(proc.stdout)
    assert result["status"] == "budget_exceeded" and "all the cost budget had left for it" in result["error"]
    assert result["cause"]["resource"] == "cost"  # the dollars were short, not the tokens
    ledger = json.loads(covey("ledger", result["job_id"], "--json").stdout)
    assert 0 < ledger["cost_used"] <= cap and ledger["cost_reserved"] == 0


def test_a_cost_cap_naming_a_model_without_prices_is_refused_naming_it(covey):
    proc = covey("run", "What is 1 + 1?", "--model", "unpriced", "--max-cost", "1")
    assert proc.returncode == 2
    assert "model 'unpriced' has no prices in the models file" in proc.stderr
    tenant = f"t{uuid.uuid4().hex[:8]}"
    assert covey("scope", f"tenant:{tenant}", "--max-cost", "1").returncode == 0
    proc = covey("run", "What is 1 + 1?", "--model", "unpriced", "--tenant", tenant, "--json")
    result = json.loads(proc.stdout)
    assert result["status"] == "failed" and result["cause"]["kind"] == "invalid_spec"
    assert (
        result["error"] == f"model unpriced has no prices in the models file, and scope tenant:{tenant} has a cost cap"
    )


def test_covey_scope_max_cost_sets_shows_and_removes_the_cap(covey):
    name = f"tenant:t{uuid.uuid4().hex[:8]}"
    row = json.loads(covey("scope", name, "--max-cost", "2.5", "--json").stdout)
    assert (row["cost_limit"], row["cost_used"]) == (2.5, 0)
    assert json.loads(covey("scope", name, "--max-cost", "none", "--json").stdout)["cost_limit"] is None
    bad = covey("scope", name, "--max-cost", "nan")
    assert bad.returncode == 2 and "'nan' is not a number of dollars" in bad.stderr


def test_a_cost_cap_across_a_sweep_of_three_priced_models_stops_within_one_call_of_it(
    priced_redis, priced_worker, models_env, tmp_path, monkeypatch
):
    for name, value in models_env.items():
        monkeypatch.setenv(name, value)  # the submitter checks the grid's models (and their prices) too
    samples = tmp_path / "d.jsonl"
    samples.write_text(
        "".join(json.dumps({"id": i, "input": f"What is {i} + 1?", "target": i + 1}) + "\n" for i in range(40))
    )
    grid = tmp_path / "g.toml"
    grid.write_text(
        'models = ["cheap", "mid", "dear"]\nstrategies = ["single"]\nscorer = "numeric"\n'
        f"budgets = [{{ max_call_tokens = {REPLY_CAP} }}]\n"
    )
    cap = 0.01
    settings = Settings(redis_url=priced_redis.url)
    outcome = run_sweep(samples, grid, tmp_path / "out", settings=settings, max_in_flight=6, max_cost_total=cap)
    scope = next(r for r in Client(settings).ledger.scope_rows() if r.name == f"sweep:{outcome.sweep_id}")
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    statuses = Counter(r["status"] for r in rows)
    assert outcome.dry and statuses["skipped_budget"] > 0 and statuses["completed"] > 0
    assert {r["config"].split("/")[0] for r in rows if r["status"] == "completed"} == set(PRICES)
    assert scope.cost_reserved == 0 and scope.cost_used <= cap  # never over
    assert round(sum(r["usage"]["cost_usd"] for r in rows), 6) == scope.cost_used
    # The call that ran the sweep dry was refused with nothing else in flight: what was left then is
    # what is left now, and less than that one call's worst case.
    (last,) = [r for r in rows if r["status"] == "skipped_budget" and r.get("error")]
    left, needed = (float(x) for x in re.search(r"\(\$([\d.]+) left, \$([\d.]+) needed\)", last["error"]).groups())
    assert round(cap - scope.cost_used, 6) == left < needed
    dear = Price(input=Decimal(PRICES["dear"][0]), output=Decimal(PRICES["dear"][1]))
    assert needed <= (dear.prompt_cost(MAX_PROMPT_BYTES) + dear.reply_cost(REPLY_CAP)) / 1e6
