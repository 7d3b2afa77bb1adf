"""A 111-agent tree's trace as Arize Phoenix, a real OTLP receiver and trace viewer,
stores it: read back through Phoenix's own REST API.

Phoenix is a heavy install (about 150 packages, a database, a web app), so it is
no test dependency: this test runs where ``phoenix`` is on the PATH and is skipped
elsewhere. CI checks the same trace against ``tests/otlp_receiver.py``
(``test_tracing.py``), which decodes the exporter's real requests."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections import Counter

import httpx2
import pytest

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker
from tests.integration.test_tracing import TREE  # skips the module without the otel extra
from tests.redis_server import free_port

PHOENIX = shutil.which("phoenix")
pytestmark = pytest.mark.skipif(PHOENIX is None, reason="Arize Phoenix is not installed (pip install arize-phoenix)")

START_SECONDS = 180  # Phoenix migrates its database and builds its app on a first start
SPANS_SECONDS = 90


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(tmp_path_factory.mktemp("phoenix")),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
    }
    assert PHOENIX is not None
    proc = subprocess.Popen([PHOENIX, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            if httpx2.get(f"{url}/healthz", timeout=2).status_code == 200:
                break
        except httpx2.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_worker(proc)
            raise RuntimeError(f"phoenix serve did not answer on {url} within {START_SECONDS}s")
        time.sleep(0.5)
    yield url
    stop_worker(proc)


@pytest.fixture(scope="module")
def traced(redis_server, phoenix):
    otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": phoenix, "OTEL_BSP_SCHEDULE_DELAY": "200"}
    proc = start_worker(redis_server.url, concurrency=4, processes=2, COVEY_QUEUE="phoenix", **otel)
    client = Client(Settings(redis_url=redis_server.url, model="sim", queue="phoenix"))
    wait_for_worker(client, proc)
    yield client
    client.close()
    stop_worker(proc)


def stored(phoenix: str, trace_id: str, want: dict[str, int]) -> list[dict]:
    """The trace's spans as Phoenix serves them (OTLP JSON), once it holds ``want``'s
    count of spans of each ``gen_ai.operation.name``."""
    deadline = time.monotonic() + SPANS_SECONDS
    while True:
        spans, cursor = [], None
        while True:
            params = {"trace_id": trace_id, "limit": 1000, **({"cursor": cursor} if cursor else {})}
            page = httpx2.get(f"{phoenix}/v1/projects/default/spans/otlpv1", params=params, timeout=10).json()
            spans += page["data"]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        kinds = Counter(attributes(s).get("gen_ai.operation.name") for s in spans)
        if all(kinds[k] >= n for k, n in want.items()) or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def attributes(span: dict) -> dict:
    """An OTLP JSON span's attributes, each value the one field of its AnyValue that is set."""
    return {a["key"]: next((v for v in a["value"].values() if v is not None), None) for a in span.get("attributes", [])}


def test_phoenix_stores_a_111_agent_tree_as_one_trace_under_the_right_parents(traced, phoenix):
    handle = traced.submit(traced.spec(TREE, budget={"max_agents": 200, "max_depth": 2}))
    result = handle.result(timeout=300)
    assert result.status == "completed" and result.usage.agents == 110, result
    trace_id = handle.id.replace("-", "")
    calls = 2 * 11 + 100
    spans = stored(phoenix, trace_id, {"invoke_agent": 111, "chat": calls})
    agents = {
        attributes(s)["covey.agent_id"]: s
        for s in spans
        if attributes(s).get("gen_ai.operation.name") == "invoke_agent"
    }
    assert len(agents) == 111
    assert Counter(attributes(s)["covey.depth"] for s in agents.values()) in (
        {0: 1, 1: 10, 2: 100},
        {"0": 1, "1": 10, "2": 100},
    )
    assert not agents["root"].get("parent_span_id")
    for agent_id, span in agents.items():
        if agent_id != "root":
            assert span["parent_span_id"] == agents[attributes(span)["covey.parent_id"]]["span_id"], agent_id
    chats = [attributes(s) for s in spans if attributes(s).get("gen_ai.operation.name") == "chat"]
    assert len(chats) == calls
    tokens = sum(int(a["gen_ai.usage.input_tokens"]) + int(a["gen_ai.usage.output_tokens"]) for a in chats)
    assert tokens == handle.ledger().tokens_used == result.usage.total_tokens
