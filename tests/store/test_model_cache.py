"""The reply cache's rules: a request's key is every field that shapes its reply;
only answers are kept; a kept reply is served only where it fits the reply tokens
granted now; anything unreadable under a key is a miss, never an error."""

from __future__ import annotations

import pytest

from covey import keys
from covey.results import Usage
from covey.store.model_cache import ModelCache, digest

MESSAGES = [{"role": "user", "content": "What is 2 + 3?"}]
TOOLS = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]
PARAMS = {"model": "gpt-x", "max_completion_tokens": 512, "seed": 7}
REPLY = {"content": "5", "tool_calls": [], "finish_reason": "stop"}
SPENT = Usage(prompt_tokens=40, completion_tokens=3, cycles=1, cost_micros=12)


def key(**changed) -> str:
    fields = {"endpoint": "https://api.example/v1", "messages": MESSAGES, "tools": TOOLS, "schema": None}
    return digest(**{**fields, "params": PARAMS, **changed})


def test_every_field_of_a_request_changes_its_key_and_nothing_else_does():
    assert key() == key(params=dict(reversed(list(PARAMS.items()))))  # the order of a mapping is no difference
    others = [
        key(endpoint="https://elsewhere/v1"),
        key(messages=[{"role": "user", "content": "What is 2 + 4?"}]),
        key(tools=[]),
        key(schema={"type": "object"}),
        key(params={**PARAMS, "seed": 8}),
        key(params={**PARAMS, "max_completion_tokens": 256}),
        key(params={**PARAMS, "model": "gpt-y"}),
    ]
    assert len({key(), *others}) == len(others) + 1


@pytest.fixture
def cache(redis_client) -> ModelCache:
    return ModelCache(redis_client, ttl=3600)


def test_an_answer_is_kept_and_served_while_it_fits_the_reply_tokens_granted(cache, redis_client):
    cache.put(key(), REPLY, SPENT)
    found = cache.get(key(), reply_tokens=3)
    assert found is not None and (found.reply, found.usage) == (REPLY, SPENT)
    assert cache.get(key(), reply_tokens=2) is None  # a reply longer than this call may spend
    assert cache.get(key(tools=[]), reply_tokens=100) is None  # another request
    assert 3590 < redis_client.ttl(keys.model_reply(key())) <= 3600


def test_a_reply_cut_at_its_cap_or_without_a_finish_is_not_kept(cache):
    cut, unfinished = key(endpoint="cut"), key(endpoint="unfinished")
    cache.put(cut, {**REPLY, "finish_reason": "length"}, SPENT)
    cache.put(unfinished, {"content": "5"}, SPENT)
    assert cache.get(cut, 100) is None and cache.get(unfinished, 100) is None


def test_a_kept_value_that_is_no_reply_is_a_miss(cache, redis_client):
    torn = key(endpoint="torn")
    for raw in ("not json", '{"reply": {}}', '{"reply": 3, "usage": {}}', '{"usage": {"prompt_tokens": "x"}}'):
        redis_client.set(keys.model_reply(torn), raw)
        assert cache.get(torn, 100) is None, raw
