"""Counting a request's tokens before it is sent, to reserve the worst case.

The ledger reserves ``estimate + max_tokens`` before each call and settles the
usage the endpoint reports. The estimate is taken over the request's JSON; the
sim model bills the same text at four characters a token, so three a token is
a strict upper bound there and a generous one for real tokenizers on English
text (dense code or CJK text can beat it; settle records what was really used).
"""

from __future__ import annotations

import json
import math
from typing import Any

CHARS_PER_TOKEN_ESTIMATE = 3
ESTIMATE_OVERHEAD_TOKENS = 8  # per-request framing a real endpoint adds


def prompt_text(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """The request's messages and tools as compact JSON: what both sides count over."""
    return json.dumps({"messages": messages, "tools": tools or []}, separators=(",", ":"))


def estimate_prompt_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
    return math.ceil(len(prompt_text(messages, tools)) / CHARS_PER_TOKEN_ESTIMATE) + ESTIMATE_OVERHEAD_TOKENS
