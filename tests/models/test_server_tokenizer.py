"""A server's own count of a prompt, on each server's route, and the bytes when none answers."""

from __future__ import annotations

import json

import httpx2
import pytest

from covey.models.server_tokenizer import ServerTokenizer
from covey.models.tokens import ESTIMATE_OVERHEAD_TOKENS, byte_tokens, prompt_bound, prompt_text

TEXT = "a dragon learns to cook"


def server(route: str, answer):
    asked = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        asked.append((request.url.path, json.loads(request.content)))
        if request.url.path != route:
            return httpx2.Response(404, json={"detail": "Not Found"})
        return httpx2.Response(200, json=answer(json.loads(request.content)))

    return httpx2.MockTransport(handle), asked


@pytest.mark.parametrize(
    "route, answer",
    [
        ("/extras/tokenize/count", lambda body: {"count": len(body["input"].split())}),  # llama-cpp-python
        ("/tokenize", lambda body: {"tokens": list(range(len(body.get("content", body.get("prompt", "")).split())))}),
    ],
)
def test_the_first_route_that_answers_counts_and_is_kept(route, answer):
    transport, asked = server(route, answer)
    tokenizer = ServerTokenizer("http://local.test/v1", "m", "key", transport=transport)
    assert tokenizer.count(TEXT) == 5 and tokenizer.count("one two") == 2
    assert [path for path, _ in asked].count(route) == 2 and asked[-1][0] == route  # found once, then asked alone


def test_a_server_that_counts_nothing_is_bounded_by_bytes_and_not_asked_again_at_once():
    transport, asked = server("/nowhere", lambda body: {})
    tokenizer = ServerTokenizer("http://local.test/v1", "m", None, transport=transport)
    assert tokenizer.count(TEXT) == byte_tokens(TEXT) and tokenizer.count(TEXT) == byte_tokens(TEXT)
    assert len(asked) == 3  # each route once, then the bytes for a while


def test_a_request_with_tools_is_bounded_by_its_bytes_where_a_server_counts():
    transport, _ = server("/extras/tokenize/count", lambda body: {"count": 1})
    tokenizer = ServerTokenizer("http://local.test/v1", "m", None, transport=transport)
    messages = [{"role": "user", "content": TEXT}]
    tools = [{"type": "function", "function": {"name": "calculator"}}]
    assert prompt_bound(messages, [], None, tokenizer, None)[0] == 1 + tokenizer.overhead
    assert prompt_bound(messages, tools, None, tokenizer, None)[0] == (
        byte_tokens(prompt_text(messages, tools)) + ESTIMATE_OVERHEAD_TOKENS
    )
