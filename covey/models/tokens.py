"""Counting a request's tokens before it is sent, to reserve the worst case.

The ledger reserves ``estimate + max_tokens`` before each call and settles the
usage the endpoint reports. The estimate is a strict upper bound for any
byte-level tokenizer (the BPE of GPT, Llama, Qwen, ...: every token covers at least
one byte of UTF-8), so dense text (code, CJK) cannot cost more than was reserved:
one token per UTF-8 byte of the request's messages and tools as compact JSON, which
holds every byte an endpoint renders into its prompt plus JSON's own quotes, keys
and braces, and a fixed overhead for the framing the endpoint adds. It reserves
about four times what English text costs; settle charges what the endpoint reports,
so the surplus is held only while the call runs.
"""

from __future__ import annotations

import json
from typing import Any

# Per-request framing beyond what the JSON holds (the reply's priming tokens); each
# message's and tool's own framing is covered by its JSON keys and braces.
ESTIMATE_OVERHEAD_TOKENS = 8


def prompt_text(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """The request's messages and tools as compact JSON: what both sides count over."""
    return json.dumps({"messages": messages, "tools": tools or []}, separators=(",", ":"), ensure_ascii=False)


def byte_tokens(text: str) -> int:
    """The most tokens a byte-level tokenizer can make of ``text``: its UTF-8 bytes
    (a lone surrogate, which JSON may carry, counts as the 3 bytes it is escaped from)."""
    return len(text.encode("utf-8", "surrogatepass"))


def estimate_prompt_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
    """An upper bound on the prompt tokens of a request with ``messages`` and ``tools``."""
    return byte_tokens(prompt_text(messages, tools)) + ESTIMATE_OVERHEAD_TOKENS


def schema_tokens(schema: dict[str, Any] | None) -> int:
    """The upper bound of a ``response_format`` schema's share of the prompt."""
    return 0 if schema is None else byte_tokens(json.dumps(schema, separators=(",", ":"), ensure_ascii=False))
