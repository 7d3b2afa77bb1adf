"""The sim model served over real HTTP, driven by the real OpenAI SDK."""

from __future__ import annotations

import json
import threading

import openai
import pytest

from covey.orchestration.tool_schemas import TOOL_SCHEMAS
from covey.models.sim.server import make_server

TOOLS = [TOOL_SCHEMAS["finish"]]


@pytest.fixture(scope="module")
def base_url():
    server = make_server("127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def create(base_url, task, max_retries=0, timeout=5.0):
    client = openai.OpenAI(api_key="sim", base_url=base_url, max_retries=max_retries, timeout=timeout)
    with client:
        messages = [{"role": "user", "content": task}]
        return client.chat.completions.create(model="sim", messages=messages, tools=TOOLS)


def test_serves_chat_completions(base_url):
    response = create(base_url, "Say hello")
    (call,) = response.choices[0].message.tool_calls
    assert (call.function.name, call.function.arguments) == ("finish", json.dumps({"answer": "done: Say hello"}))
    assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens


def test_429_retry_succeeds_over_http(base_url):
    response = create(base_url, "Hi [sim:fail 429]", max_retries=1)
    assert response.choices[0].finish_reason == "tool_calls"


def test_429_headers_reach_the_client(base_url):
    with pytest.raises(openai.RateLimitError) as caught:
        create(base_url, "Hi [sim:fail 429]")
    assert caught.value.response.headers["retry-after-ms"] == "20"


def test_timeout_stalls_past_the_clients_read_timeout(base_url):
    with pytest.raises(openai.APITimeoutError):
        create(base_url, "Hi [sim:fail timeout]", timeout=0.3)


def test_unknown_route_is_404(base_url):
    client = openai.OpenAI(api_key="sim", base_url=base_url, max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.list()
    assert caught.value.body["type"] == "invalid_request_error"


def test_timeout_stall_is_capped_at_30_seconds():
    slept = []
    server = make_server("127.0.0.1", 0, sleep=slept.append)  # records the stall instead of sleeping
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        with pytest.raises(openai.InternalServerError):  # the 504 written after the (skipped) stall
            create(f"http://127.0.0.1:{server.server_address[1]}/v1", "Hi [sim:fail timeout]", timeout=600)
    finally:
        server.shutdown()
        server.server_close()
    assert slept == [30.0]
