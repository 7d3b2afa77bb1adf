"""Bounding a request's prompt tokens before it is sent, to reserve the worst case.

The ledger reserves ``bound + max_tokens`` before each call and settles the usage
the endpoint reports, so the bound must be strict yet close. Three bounds, the
smallest that applies is taken:

- bytes: one token per UTF-8 byte of the request's messages and tools as compact
  JSON, plus a fixed framing overhead. Strict for any byte-level tokenizer (the BPE
  of GPT, Llama, Qwen, ...: every token covers at least one byte), so dense text
  (code, CJK) cannot cost more; about four times what English costs.
- the model's tokenizer (``covey.models.tokenizers``), where the models file names
  one: that count over the same JSON, plus the overhead.
- the previous call: an agent's next prompt is its previous prompt plus what was
  appended since, so the prompt tokens the endpoint reported for that call, plus
  the byte bound of the appended messages alone, plus the overhead. It applies
  only when the earlier messages, the tools and the schema are the ones that call
  sent (``PromptMark``); a strategy that builds a fresh prompt gets the others.

An image is no byte-level text: each costs ``IMAGE_TOKENS`` and its base64 none
(the JSON counted holds a digest of it, so a changed image is a changed prompt).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from covey import parts

if TYPE_CHECKING:
    from covey.models.tokenizers import Tokenizer

# Per-request framing beyond what the JSON holds (the reply's priming tokens); each
# message's and tool's own framing is covered by its JSON keys and braces. A
# tokenizer says its own (``Tokenizer.overhead``).
ESTIMATE_OVERHEAD_TOKENS = 8
# One image's prompt tokens, whatever its bytes: above what the hosted vision models
# charge the largest image they take, which they scale down first (OpenAI's at most
# 1,445 for gpt-4o's tiles in high detail and 2,642 for the patches of gpt-4.1-mini
# and o4-mini; Anthropic's about 1,600; Gemini's 258 a tile). A local model that
# bills by the source's pixels (Qwen-VL) must cap them (its max_pixels) to stay under.
IMAGE_TOKENS = 3000


class PromptMark(BaseModel):
    """What an agent's last call sent and what its prompt cost, for the next call's bound."""

    messages: int  # how many messages it sent
    digest: str  # of those messages, the tools and the schema
    tokens: int  # prompt tokens the endpoint reported for it


def prompt_text(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """The request's messages and tools as compact JSON, each image's data a digest:
    what both sides count over."""
    return _counted({"messages": messages, "tools": tools or []})[0]


def _counted(value: Any) -> tuple[str, int]:
    """``value`` as compact JSON, each image's data a digest, and the tokens of its images."""
    text = _json(value)
    if '"image_url"' not in text:  # the common case: no image, no walk
        return text, 0
    marked, count = parts.marked(value)
    return _json(marked), count * IMAGE_TOKENS


def byte_tokens(text: str) -> int:
    """The most tokens a byte-level tokenizer can make of ``text``: its UTF-8 bytes
    (a lone surrogate, which JSON may carry, counts as the 3 bytes it is escaped from)."""
    return len(text.encode("utf-8", "surrogatepass"))


def estimate_prompt_tokens(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tokenizer: Tokenizer | None = None
) -> int:
    """An upper bound on the prompt tokens of a request with ``messages`` and ``tools``:
    the tokenizer's count where one is given, else the bytes."""
    count, overhead = _counting(tokenizer, tools)
    text, images = _counted({"messages": messages, "tools": tools or []})
    return count(text) + images + overhead


def prompt_bound(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    schema: dict[str, Any] | None,
    tokenizer: Tokenizer | None,
    last: PromptMark | None,
) -> tuple[int, PromptMark]:
    """The smallest strict bound that applies to this request's prompt (see the
    module), and the request's mark, its tokens 0 until the endpoint reports them.
    Both come from one JSON text of the request: a call's largest serialisation."""
    text, images = _counted({"messages": messages, "tools": tools or []})
    schema_text = _json(schema) if schema is not None else ""
    sent = PromptMark(messages=len(messages), digest=_digest(text, schema_text), tokens=0)
    count, overhead = _counting(tokenizer, tools)
    whole = count(text) + images + overhead + (count(schema_text) if schema_text else 0)
    if last is None or len(messages) < last.messages:
        return whole, sent
    earlier = (
        sent.digest
        if len(messages) == last.messages
        else _digest(prompt_text(messages[: last.messages], tools), schema_text)
    )
    if earlier != last.digest:
        return whole, sent
    appended, appended_images = _counted(messages[last.messages :])
    return min(whole, last.tokens + byte_tokens(appended) + appended_images + ESTIMATE_OVERHEAD_TOKENS), sent


def _counting(tokenizer: Tokenizer | None, tools: list[dict[str, Any]] | None) -> tuple[Callable[[str], int], int]:
    """How a text's tokens are bounded, and the request's framing: the tokenizer's, else
    the bytes'; the bytes' for a request with tools that a server counts (its template's
    preamble for them is no part of the text it counts)."""
    if tokenizer is None or (tools and tokenizer.remote):
        return byte_tokens, ESTIMATE_OVERHEAD_TOKENS
    return tokenizer.count, tokenizer.overhead


def _digest(text: str, schema_text: str) -> str:
    """Of a request's messages and tools (``prompt_text``) and its schema."""
    whole = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
    whole.update(b"\0" + schema_text.encode("utf-8", "surrogatepass"))
    return whole.hexdigest()[:32]


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
