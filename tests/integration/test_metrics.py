"""``covey worker --metrics-port``: one Prometheus endpoint for every worker process,
scraped after real jobs; its token and cost counters are the ledger's."""

from __future__ import annotations

import json
import time
from collections import defaultdict

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import said_address, start_covey_worker, stop_worker, wait_for_worker
from tests.redis_server import RedisServer

TREE = "[sim:spawn width=2 depth=2] survey the field"  # 7 agents
TOOL = 'Compute. [sim:call calculator {"expression": "6*7"}]'


@pytest.fixture(scope="module")
def metered(redis_server):
    flags = ["--processes", "2", "--concurrency", "4", "--queues", "metered", "--metrics-port", "0"]
    price = json.dumps({"input": 0.15, "output": 0.6})  # USD per million tokens
    proc = start_covey_worker(redis_server.url, flags, COVEY_QUEUE="metered", COVEY_SIM_PRICE=price)
    url = said_address(proc, proc.log_path, r"^covey worker: metrics on (http://\S+/metrics) ", "covey worker")
    client = Client(Settings(redis_url=redis_server.url, model="sim", queue="metered"))
    wait_for_worker(client, proc)
    yield client, url
    client.close()
    stop_worker(proc)


def test_a_stopped_worker_leaves_no_samples_folder_behind(tmp_path):
    flags = ["--processes", "2", "--concurrency", "2", "--metrics-port", "0"]
    with RedisServer() as own:  # its worker alone answers the wait
        proc = start_covey_worker(own.url, flags, TMPDIR=str(tmp_path), PROMETHEUS_MULTIPROC_DIR="")
        client = Client(Settings(redis_url=own.url))
        try:
            wait_for_worker(client, proc)
            assert [p.name[:14] for p in tmp_path.iterdir()] == ["covey-metrics-"]
        finally:
            client.close()
            stop_worker(proc)  # SIGTERM, as a supervisor stops it
    assert proc.returncode == 0 and list(tmp_path.iterdir()) == []


def scrape(url: str) -> dict[str, dict[tuple, float]]:
    """Sample name -> its labels (sorted pairs) -> value."""
    samples: dict[str, dict[tuple, float]] = defaultdict(dict)
    for family in text_string_to_metric_families(httpx2.get(url, timeout=10).text):
        for s in family.samples:
            samples[s.name][tuple(sorted(s.labels.items()))] = s.value
    return samples


def total(samples: dict[tuple, float], **labels: str) -> float:
    return sum(v for k, v in samples.items() if set(labels.items()) <= set(k))


def test_a_scrape_after_jobs_counts_the_tokens_the_ledger_charged(metered):
    client, url = metered
    handles = [client.submit(client.spec(TREE)), client.submit(client.spec(TOOL))]
    results = [h.result(timeout=120) for h in handles]
    assert all(r.ok for r in results), results
    charged = sum(h.ledger().tokens_used for h in handles)
    assert charged > 0
    # The last agent's step has returned its result; its process wrote its samples before.
    deadline = time.monotonic() + 30
    while (m := scrape(url)) and total(m["covey_agents_finished_total"]) < 8 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert total(m["covey_tokens_total"], scope="global") == charged
    cost = sum(h.ledger().cost_used for h in handles)
    assert cost > 0 and total(m["covey_cost_dollars_total"], scope="global", model="sim") == pytest.approx(cost)
    assert total(m["covey_tokens_total"], scope="global", model="sim", kind="prompt") == sum(
        r.usage.prompt_tokens for r in results
    )
    assert total(m["covey_agents_finished_total"], status="completed") == 8
    assert total(m["covey_agents_started_total"]) == 8
    assert total(m["covey_model_calls_total"], model="sim") == sum(r.usage.cycles for r in results)
    assert total(m["covey_model_call_seconds_count"], model="sim") == sum(r.usage.cycles for r in results)
    assert total(m["covey_tool_calls_total"], tool="calculator", outcome="ok") == 1
    assert total(m["covey_agent_steps_running"]) == 0  # nothing runs now


def test_a_refusal_is_counted_by_its_resource(metered):
    client, url = metered
    result = client.submit(client.spec(TREE, budget={"max_tokens": 300})).result(timeout=120)
    assert result.status == "budget_exceeded", result
    assert total(scrape(url)["covey_refusals_total"], resource="tokens") >= 1
