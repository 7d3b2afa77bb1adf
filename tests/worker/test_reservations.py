"""What a call reserves: an exact first count where the tokenizer is configured, the
previous call's reported prompt plus the bytes appended since, and the worst cost.

The loop runs on a real Redis ledger; the endpoint is an ``httpx2.MockTransport``
handler behind the real OpenAI SDK, billing prompts with the same trained BPE the
models file names, as a provider would with its own tokenizer.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import replace
from decimal import Decimal
from typing import Any

import httpx2
import pytest

from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentTerms
from covey.budgets.prices import Price
from covey.config.settings import Settings
from covey.context import RunContext
from covey.models.catalog import Catalog
from covey.models.dialect import Dialects
from covey.models.llm import LLM
from covey.models.structured import asking
from covey.models.tokens import ESTIMATE_OVERHEAD_TOKENS, byte_tokens, prompt_bound, prompt_text
from covey.orchestration.actions import CallModel
from covey.spec import AgentSpec
from covey.status import AgentStatus
from covey.worker import loop
from covey.worker.deps import Deps
from covey.worker.reservation import reservation
from tests import sse
from tests.models.test_tokenizers import train

PRICE = Price(input=Decimal("0.15"), cached_input=Decimal("0.075"), output=Decimal("0.6"))
CACHED = 10  # prompt tokens the endpoint says it served from its cache


class Endpoint:
    """Answers every call (the calculator first when asked ``What is``), billing the
    prompt as ``count`` makes it, and keeps each request."""

    def __init__(self, count) -> None:
        self.count, self.requests = count, []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.read())
        self.requests.append(body)
        messages = body["messages"]
        if "What is" in messages[-1]["content"] and len(self.requests) == 1:
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression":"6*7"}'},
            }
            message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "42"}, "stop"
        prompt = self.count(prompt_text(messages, body.get("tools")))
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": 3,
            "total_tokens": prompt + 3,
            "prompt_tokens_details": {"cached_tokens": min(CACHED, prompt)},
        }
        choice = {"index": 0, "message": message, "finish_reason": finish}
        body = {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice], "usage": usage}
        return sse.answer(request, body)


@pytest.fixture
def bpe(tmp_path):
    return train(tmp_path / "tokenizer.json")


@pytest.fixture
def models(tmp_path, bpe):
    path = tmp_path / "models.toml"
    path.write_text(
        '[models.exact]\nbase_url = "http://mock.test/v1"\napi_key_env = "K"\ntokenizer = "tokenizer.json"\n'
        "price = { input = 0.15, cached_input = 0.075, output = 0.60 }\n\n"
        '[models.plain]\nbase_url = "http://mock.test/v1"\napi_key_env = "K"\n'
    )
    return path


def deps_for(redis_server, models, endpoint: Endpoint) -> Deps:
    settings = Settings(redis_url=redis_server.url, model_retries=0, models=models)
    deps = Deps.from_settings(settings)
    catalog = Catalog.from_settings(settings, environ={"K": "key"})
    deps.llm = LLM(settings, catalog=catalog, transport=httpx2.MockTransport(endpoint))
    return deps


def run(deps: Deps, task: str, model: str, budget: Budget, tools: list[str], **fields: Any):
    ctx = RunContext(job_id=f"rsv-{uuid.uuid4().hex}", agent_id="root", budget=budget, allow=tools)
    spec = AgentSpec(task=task, model=model, tools=tools, **fields)
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(max_cycles=spec.max_cycles))
    state, action = loop.begin(deps, ctx, spec)
    result = loop.advance(deps, state, action).result
    snap = deps.ledger.snapshot(ctx.job_id)
    assert snap.tokens_reserved == 0 and snap.cost_reserved == 0
    assert snap.tokens_used == result.usage.total_tokens
    return result, snap


def bpe_count(bpe):
    return lambda text: len(bpe.encode(text, add_special_tokens=False).ids)


def test_a_first_call_is_reserved_at_its_tokenizers_exact_count(redis_server, models, bpe):
    endpoint = Endpoint(bpe_count(bpe))
    deps = deps_for(redis_server, models, endpoint)
    first = AgentSpec(task="Summarise the report in one word.", tools=[])
    from covey.orchestration.prompts import opening

    messages = opening(first, RunContext(job_id="j", agent_id="root", budget=Budget(), allow=[]))
    exact = bpe_count(bpe)(prompt_text(messages, [])) + ESTIMATE_OVERHEAD_TOKENS
    assert exact + 64 < byte_tokens(prompt_text(messages, []))  # the byte bound alone would refuse this cap
    # No room kept for a wrap-up: the first call may use all of it.
    result, snap = run(deps, first.task, "exact", Budget(max_tokens=exact + 64), tools=[], wrap_up=False)
    assert (result.status, result.output) == (AgentStatus.COMPLETED, "42"), result.error
    assert endpoint.requests[0]["max_completion_tokens"] == 64  # all that was left after the exact count
    assert snap.tokens_used <= exact + 64


def test_a_later_call_is_reserved_from_the_previous_calls_reported_prompt(redis_server, models):
    endpoint = Endpoint(lambda text: math.ceil(byte_tokens(text) / 4))  # a quarter of the byte bound
    deps = deps_for(redis_server, models, endpoint)
    cap = 20_000
    result, _ = run(deps, "What is 6 * 7?", "plain", Budget(max_tokens=cap), tools=["calculator"])
    assert (result.status, result.output) == (AgentStatus.COMPLETED, "42"), result.error
    first, second = endpoint.requests
    reported = endpoint.count(prompt_text(first["messages"], first.get("tools")))
    appended = second["messages"][len(first["messages"]) :]
    bound = reported + byte_tokens(json.dumps(appended, separators=(",", ":"), ensure_ascii=False))
    left = cap - (reported + 3)
    assert second["max_completion_tokens"] == min(4096, left - bound - ESTIMATE_OVERHEAD_TOKENS)
    assert bound + ESTIMATE_OVERHEAD_TOKENS < byte_tokens(prompt_text(second["messages"], second.get("tools")))


def test_cost_is_settled_from_the_reported_usage_with_cached_tokens_at_their_price(redis_server, models, bpe):
    endpoint = Endpoint(bpe_count(bpe))
    deps = deps_for(redis_server, models, endpoint)
    result, snap = run(deps, "Summarise the report.", "exact", Budget(max_cost=1.0), tools=[])
    assert result.status is AgentStatus.COMPLETED, result.error
    expected = PRICE.cost(result.usage.prompt_tokens, result.usage.completion_tokens, CACHED)
    assert result.usage.cached_tokens == CACHED and result.usage.cost_micros == expected
    assert snap.cost_used == expected / 1e6 and snap.cost_limit == 1.0


def test_a_reply_is_shrunk_to_what_the_cost_cap_has_left(redis_server, models, bpe):
    endpoint = Endpoint(bpe_count(bpe))
    deps = deps_for(redis_server, models, endpoint)
    result, snap = run(deps, "Summarise the report.", "exact", Budget(max_cost=0.0001), tools=[])  # 100 micro-dollars
    assert result.status is AgentStatus.COMPLETED, result.error
    prompt = bpe_count(bpe)(prompt_text(endpoint.requests[0]["messages"], [])) + ESTIMATE_OVERHEAD_TOKENS
    afford = math.floor((100 - PRICE.prompt_cost(prompt)) / PRICE.output)
    assert endpoint.requests[0]["max_completion_tokens"] == afford
    assert snap.cost_used <= 0.0001


def test_a_structured_call_is_bounded_as_the_worker_now_asks_it(redis_server, models):
    """A refusal may have taught an endpoint another structured mode than its models
    file's: the reservation bounds the prompt as it is sent now (a schema in a tool)."""
    deps = deps_for(redis_server, models, Endpoint(lambda text: 1))
    deps.llm = LLM(deps.settings, catalog=deps.llm.catalog, transport=deps.llm._transport, dialects=Dialects())
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    ctx = RunContext(job_id=f"rsv-{uuid.uuid4().hex}", agent_id="root", budget=Budget(), allow=[])
    spec = AgentSpec(task="Say yes.", model="plain", strategy="single", options={"schema": schema}, tools=[])
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(max_cycles=spec.max_cycles))
    state, action = loop.begin(deps, ctx, spec)
    assert isinstance(action, CallModel) and action.schema == schema
    as_asked = prompt_bound(action.messages, [], schema, None, None)[0]
    assert reservation(deps, state, action, []).prompt == as_asked
    endpoint = deps.llm.catalog.endpoint("plain")
    deps.llm.dialects.learn(endpoint, replace(endpoint.dialect, structured="tools"))
    messages, tools, _ = asking("tools", schema, action.schema_name, action.messages, [])
    in_a_tool = prompt_bound(messages, tools, None, None, None)[0]
    assert in_a_tool != as_asked and reservation(deps, state, action, []).prompt == in_a_tool
