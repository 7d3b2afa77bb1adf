"""The prompt reservation is an upper bound for any byte-level tokenizer.

A byte-level BPE never makes more tokens of a text than it has UTF-8 bytes, so the
estimate must be above the bytes of everything the endpoint renders: the sim's
``[sim:bill bytes]`` bills exactly those bytes of the request, the most such a
tokenizer could, and ``[sim:bill over]`` bills more than any tokenizer could.
"""

from __future__ import annotations

import json

import httpx2
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from covey.models.sim import directives as sim_directives
from covey.models.sim.handler import transport
from covey.models.tokenizers import SimTokenizer
from covey.models.tokens import (
    ESTIMATE_OVERHEAD_TOKENS,
    IMAGE_TOKENS,
    PromptMark,
    byte_tokens,
    estimate_prompt_tokens,
    prompt_bound,
)
from covey.parts import data_url
from covey.tools.registry import schema
from tests.images import png

TOOLS = [schema(n) for n in ("spawn_agents", "finish", "calculator")]
CJK = "請用一句話總結這段文字的主旨，並列出三個關鍵詞。" * 20
CODE = "def f(x):\n\treturn {'a': [x**2 for x in range(10)]}  # ✓\n" * 20
EMOJI = "🙂🚀" * 50


@pytest.mark.parametrize("text", [CJK, CODE, EMOJI, "plain English words"])
def test_the_estimate_is_above_every_byte_of_the_prompt(text):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]
    # The tools as the request carries them: compact JSON, as httpx2 sends a body.
    every_byte = sum(byte_tokens(m["content"]) for m in messages) + byte_tokens(
        json.dumps(TOOLS, separators=(",", ":"))
    )
    assert estimate_prompt_tokens(messages, TOOLS) > every_byte


def test_dense_text_costs_a_token_per_byte_not_per_character():
    assert byte_tokens(CJK) == 3 * len(CJK)  # three UTF-8 bytes each
    assert byte_tokens(EMOJI) == 4 * len(EMOJI)
    assert estimate_prompt_tokens([{"role": "user", "content": CJK}], []) > 3 * len(CJK)


def test_a_lone_surrogate_from_json_is_counted_not_an_error():
    text = json.loads('"a\\ud800b"')
    assert byte_tokens(text) == 5
    assert estimate_prompt_tokens([{"role": "user", "content": text}], None) > 5


def test_a_schema_is_bounded_by_its_bytes():
    schema = {"type": "object", "properties": {"答え": {"type": "string"}}}
    messages = [{"role": "user", "content": "hi"}]
    without = prompt_bound(messages, [], None, None, None)[0]
    words = sum(byte_tokens(word) for word in ("type", "object", "properties", "答え", "string"))
    assert prompt_bound(messages, [], schema, None, None)[0] - without > words


texts = st.text(st.characters(codec="utf-8"), max_size=300)


@settings(max_examples=200, deadline=None)
@given(contents=st.lists(texts, min_size=1, max_size=4))
def test_the_estimate_is_above_what_any_sim_billing_but_over_reports(contents):
    messages = [{"role": "user", "content": c} for c in contents]
    estimate = estimate_prompt_tokens(messages, TOOLS)
    assert estimate > sim_directives.prompt_tokens(messages, TOOLS, "bytes")
    assert estimate > sim_directives.prompt_tokens(messages, TOOLS)  # four characters a token
    assert sim_directives.prompt_tokens(messages, TOOLS, "over") > estimate


def ask(task: str, **kwargs):
    http = httpx2.Client(transport=transport())
    sdk = openai.OpenAI(api_key="sim", base_url="http://sim.covey/v1", http_client=http, max_retries=0)
    messages = [{"role": "user", "content": task}]
    return messages, sdk.chat.completions.create(model="sim", messages=messages, **kwargs)


def test_bill_bytes_reports_a_token_per_byte_of_prompt_and_reply():
    messages, response = ask(f"[sim:bill bytes] [sim:answer {CJK}] {CJK}")
    assert response.usage.prompt_tokens == sim_directives.prompt_tokens(messages, None, "bytes")
    assert response.usage.prompt_tokens < estimate_prompt_tokens(messages, None)
    assert response.usage.completion_tokens == byte_tokens(CJK)
    assert response.choices[0].message.content == CJK


def test_bill_bytes_cuts_a_reply_to_the_bytes_its_cap_buys():
    _, response = ask(f"[sim:bill bytes] [sim:answer {CJK}] go", max_completion_tokens=100)
    choice = response.choices[0]
    assert choice.finish_reason == "length" and response.usage.completion_tokens == 100
    assert byte_tokens(choice.message.content) <= 100 and CJK.startswith(choice.message.content)


def test_bill_over_reports_more_than_was_reserved():
    messages, response = ask("[sim:bill over] hello")
    assert response.usage.prompt_tokens > estimate_prompt_tokens(messages, None) - ESTIMATE_OVERHEAD_TOKENS


def test_an_unknown_bill_mode_is_refused_naming_the_directive():
    with pytest.raises(openai.BadRequestError, match=r"\[sim:bill words\]: expected a mode of bytes, over"):
        ask("[sim:bill words] hello")


# --- the previous call's bound ---------------------------------------------------

FIRST = [{"role": "system", "content": "be brief"}, {"role": "user", "content": CJK}]
REPLY = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {}}]}


def reported(messages, tools, schema, tokens: int) -> PromptMark:
    """The mark of a call that sent these and was billed ``tokens`` prompt tokens."""
    return prompt_bound(messages, tools, schema, None, None)[1].model_copy(update={"tokens": tokens})


def test_a_later_call_is_bounded_by_the_reported_prompt_plus_the_bytes_appended():
    last = reported(FIRST, TOOLS, None, 300)
    appended = [REPLY, {"role": "tool", "tool_call_id": "c", "content": "42"}]
    bound, _ = prompt_bound(FIRST + appended, TOOLS, None, None, last)
    assert bound == 300 + byte_tokens(json.dumps(appended, separators=(",", ":"))) + ESTIMATE_OVERHEAD_TOKENS
    assert bound < estimate_prompt_tokens(FIRST + appended, TOOLS)  # the whole prompt's bytes


@pytest.mark.parametrize(
    "messages, tools, schema",
    [
        ([FIRST[0], {"role": "user", "content": "another task"}, REPLY], TOOLS, None),  # an earlier message changed
        (FIRST + [REPLY], TOOLS[:1], None),  # other tools
        (FIRST + [REPLY], TOOLS, {"type": "object"}),  # a schema asked for now
        (FIRST[:1], TOOLS, None),  # fewer messages than the call before
    ],
)
def test_a_prompt_that_is_not_the_last_one_plus_more_is_bounded_whole(messages, tools, schema):
    last = reported(FIRST, TOOLS, None, 1)  # a mark that would under-bound any prompt it does not prefix
    schema_bytes = byte_tokens(json.dumps(schema, separators=(",", ":"))) if schema else 0
    whole = estimate_prompt_tokens(messages, tools) + schema_bytes
    assert prompt_bound(messages, tools, schema, None, last)[0] == whole


def test_the_smaller_bound_wins_where_a_tokenizer_counts_the_whole():
    last = reported(FIRST, TOOLS, None, 10_000)  # a previous report above the exact count
    exact = SimTokenizer()
    assert prompt_bound(FIRST + [REPLY], TOOLS, None, exact, last)[0] == estimate_prompt_tokens(
        FIRST + [REPLY], TOOLS, exact
    )


# --- images: a bound of their own, not their base64 ------------------------------


def _with_image(text: str, url: str) -> list[dict]:
    return [
        {"role": "user", "content": [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]}
    ]


def test_an_image_costs_its_own_bound_never_its_base64():
    url = data_url(png(64, 64) + b"\0" * 50_000, "image/png")
    messages = _with_image("What is this?", url)
    estimate = estimate_prompt_tokens(messages, TOOLS)
    without = estimate_prompt_tokens([{"role": "user", "content": [{"type": "text", "text": "What is this?"}]}], TOOLS)
    assert IMAGE_TOKENS < estimate - without < IMAGE_TOKENS + 200  # its digest's few bytes, not 66 KB of base64
    assert estimate > sim_directives.prompt_tokens(messages, TOOLS, "bytes")  # billed the whole bound: still under
    assert sim_directives.prompt_tokens(messages, TOOLS) < estimate


def test_an_image_appended_since_the_last_call_costs_its_bound_and_another_image_is_another_prompt():
    first = [{"role": "user", "content": "hi"}]
    _, mark = prompt_bound(first, [], None, None, None)
    last = mark.model_copy(update={"tokens": 10})
    url = data_url(png(8, 8), "image/png")
    bound, _ = prompt_bound([*first, *_with_image("look", url)], [], None, None, last)
    assert IMAGE_TOKENS + 10 < bound < IMAGE_TOKENS + 200
    one = prompt_bound(_with_image("x", url), [], None, None, None)[1]
    other = prompt_bound(_with_image("x", data_url(png(9, 8), "image/png")), [], None, None, None)[1]
    assert one.digest != other.digest
