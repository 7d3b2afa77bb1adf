"""A cap of tokens across an agent's tree: the plain Agents SDK has none to set, covey holds one.

The same triage agent (a tool, two ``as_tool`` sub-agents, a handoff) runs the
same script twice against one ``covey sim-server``: with the plain SDK (no covey) at its own
per-call cap (``ModelSettings.max_tokens``), and as a covey job capped at
``CAP`` tokens. The SDK sums its sub-agents' usage into the run's, but nothing of
it stops a run at a total: the per-call cap bounds each reply, not the prompts
nor the calls' sum, and the tree spends past ``CAP``; covey's ledger reserves every
call of the tree against ``CAP`` and stays within it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import sys
from contextlib import closing

import pytest
from agents import ModelSettings, OpenAIChatCompletionsModel, RunConfig, Runner
from openai import AsyncOpenAI

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import (
    ROOT,
    SIMHTTP,
    served_over_http,
    start_sim_server,
    start_worker,
    stop_worker,
    wait_for_worker,
)
from tests.integration.test_agents_sdk import ASKING, PATH, TRIAGE
from tests.redis_server import RedisServer

CAP = 2_600  # for the whole tree: its first call and a wrap-up's share fit; the run as scripted (3148) does not
PER_CALL = 50  # the SDK's max_tokens on every call, sub-agents' too (its RunConfig's settings reach them)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with RedisServer() as server:
        sim_server, base_url = start_sim_server(server.url)
        try:
            yield server, base_url, served_over_http(tmp_path_factory.mktemp("models"), base_url)
        finally:
            stop_worker(sim_server)


def plain_run(base_url: str):
    """The agent on the plain SDK, every call of it answered by the sim over HTTP."""
    sys.path.insert(0, f"{ROOT}/examples/agents")
    try:
        from covey_example_agents.triage import triage
    finally:
        sys.path.remove(f"{ROOT}/examples/agents")
    model = OpenAIChatCompletionsModel(model="sim", openai_client=AsyncOpenAI(base_url=base_url, api_key="unused"))
    config = RunConfig(model=model, model_settings=ModelSettings(max_tokens=PER_CALL), tracing_disabled=True)
    return asyncio.run(Runner.run(triage, ASKING, run_config=config))


def test_the_plain_sdk_offers_no_cap_across_a_run_and_its_tree_spends_past_one(sim):
    _, base_url, _ = sim
    knobs = [*(f.name for f in dataclasses.fields(RunConfig)), *inspect.signature(Runner.run).parameters]
    knobs += [f.name for f in dataclasses.fields(ModelSettings)]
    assert [k for k in knobs if "token" in k or "limit" in k] == ["max_tokens"]  # one call's reply, no more
    result = plain_run(base_url)
    usage = result.context_wrapper.usage
    assert result.final_output == "refund of order A1 started"
    assert usage.requests == 8  # six calls of triage and billing, one of each sub-agent: their usage summed in
    assert all(r.output_tokens <= PER_CALL for r in usage.request_usage_entries)  # the per-call cap held
    assert usage.total_tokens > CAP  # and the tree went past a cap no setting of the SDK could hold


def test_the_same_agent_as_a_covey_job_capped_at_n_tokens_stays_within_n_across_its_tree(sim):
    server, _, models = sim
    queue = "agents-caps-http"
    worker = start_worker(server.url, hostname=f"{queue}@%h", COVEY_QUEUE=queue, PYTHONPATH=PATH, **models)
    with closing(Client(Settings(redis_url=server.url, queue=queue))) as client:
        try:
            wait_for_worker(client, worker)
            handle = client.submit(
                client.spec(ASKING, agent=TRIAGE, model=SIMHTTP, max_call_tokens=PER_CALL, budget={"max_tokens": CAP})
            )
            result = handle.result(timeout=120)
            ledger = handle.ledger()
        finally:
            stop_worker(worker)
    assert ledger.tokens_used <= CAP and ledger.tokens_reserved == 0
    assert ledger.agents_spawned >= 1 and ledger.tokens_used == result.usage.total_tokens  # a sub-agent's within it
    assert result.status.value == "budget_exceeded" or result.wrapped_up, result  # the cap bit, and held
