"""The sim model served over real HTTP, driven by the real OpenAI SDK."""

from __future__ import annotations

import hashlib
import json
import threading
from contextlib import contextmanager

import httpx2
import openai
import pytest

from covey.models.sim.handler import transport
from covey.models.sim.server import make_server
from covey.tools.registry import schema

TOOLS = [schema("finish")]


@contextmanager
def running(server):
    """``server`` serving on a thread; yields its root URL."""
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def base_url():
    with running(make_server("127.0.0.1", 0)) as root:
        yield f"{root}/v1"


@pytest.fixture
def root():
    """A server of its own, so its call counts start at zero."""
    with running(make_server("127.0.0.1", 0)) as root:
        yield root


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
    with running(make_server("127.0.0.1", 0, sleep=slept.append)) as root:  # records the stall, skips it
        with pytest.raises(openai.InternalServerError):  # the 504 written after the (skipped) stall
            create(f"{root}/v1", "Hi [sim:fail timeout]", timeout=600)
    assert slept == [30.0]


# --- call counts --------------------------------------------------------------------


def test_counts_chat_completion_calls_by_body(root):
    assert httpx2.get(f"{root}/sim/calls").json() == {"total": 0, "by_body": {}, "in_flight": 0, "most_in_flight": 0}
    create(f"{root}/v1", "Say hello")
    create(f"{root}/v1", "Say hello")
    create(f"{root}/v1", "Say goodbye")
    counts = httpx2.get(f"{root}/sim/calls").json()
    assert counts["total"] == 3
    assert sorted(counts["by_body"].values()) == [1, 2]


def test_the_digest_is_the_sha1_of_the_raw_body(root):
    body = json.dumps({"model": "sim", "messages": [{"role": "user", "content": "Hi"}]}).encode()
    assert httpx2.post(f"{root}/v1/chat/completions", content=body).status_code == 200
    digest = hashlib.sha1(body).hexdigest()[:12]
    assert httpx2.get(f"{root}/sim/calls").json()["by_body"] == {digest: 1}


def test_every_arrival_counts_including_a_retry_and_failures(root):
    create(f"{root}/v1", "Hi [sim:fail 429]", max_retries=1)
    with pytest.raises(openai.BadRequestError):
        create(f"{root}/v1", "[sim:jump]")
    assert sorted(httpx2.get(f"{root}/sim/calls").json()["by_body"].values()) == [1, 2]


def test_other_routes_are_not_counted(root):
    with pytest.raises(openai.NotFoundError):
        openai.OpenAI(api_key="sim", base_url=f"{root}/v1", max_retries=0).models.list()
    httpx2.get(f"{root}/sim/calls")
    assert httpx2.get(f"{root}/sim/calls").json()["total"] == 0


def test_delete_answers_the_counts_and_resets_them(root):
    create(f"{root}/v1", "Say hello")
    cleared = httpx2.delete(f"{root}/sim/calls").json()
    assert cleared["total"] == 1
    assert httpx2.get(f"{root}/sim/calls").json() == {"total": 0, "by_body": {}, "in_flight": 0, "most_in_flight": 0}


def test_the_in_process_transport_keeps_no_counts():
    with httpx2.Client(transport=transport()) as http:
        assert http.get("http://sim.covey/sim/calls").status_code == 404


def test_counts_the_most_calls_answered_at_once():
    with running(make_server("127.0.0.1", 0, latency_ms=1000)) as root:
        threads = [threading.Thread(target=create, args=(f"{root}/v1", f"Say {i}")) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        create(f"{root}/v1", "Say alone")
        counts = httpx2.delete(f"{root}/sim/calls").json()
        assert (counts["total"], counts["in_flight"], counts["most_in_flight"]) == (4, 0, 3)
        create(f"{root}/v1", "Say alone")
        assert httpx2.get(f"{root}/sim/calls").json()["most_in_flight"] == 1
