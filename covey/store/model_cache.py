"""Model replies kept for reuse: a job with ``cache`` on (``JobSpec.cache``, a
sweep's ``cache = true``) is served a reply to a request identical to an earlier
one without calling the model, and charged nothing for it.

Identical means the same endpoint and provider model, messages, tools, answer
schema, model parameters (the seed among them) and reply cap asked for: the
digest of all of them is the key. Only answers are kept: a reply cut at its cap
or an error is asked for again. A kept reply is served only when it fits the
reply tokens the call was granted now, so a cache never lets a call spend past
what its budget had left, even at no cost.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import redis

from covey import keys
from covey.results import Usage

KEPT_FINISHES = frozenset({"stop", "tool_calls"})  # answers; a "length" cut is not one


def digest(
    endpoint: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    schema: dict[str, Any] | None,
    params: dict[str, Any],
) -> str:
    """The key of a request: every field that shapes its reply (``params``: the provider's
    model id, the sampling parameters and the reply cap), in one canonical JSON."""
    request = {"endpoint": endpoint, "messages": messages, "tools": tools, "schema": schema, "params": params}
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Cached:
    reply: dict[str, Any]  # as covey.worker.replay.CallRecord keeps it
    usage: Usage  # what the call that made it cost


class ModelCache:
    def __init__(self, client: redis.Redis, ttl: int) -> None:
        self._redis, self._ttl = client, ttl

    def get(self, key: str, reply_tokens: int) -> Cached | None:
        """The kept reply of request ``key`` when it fits ``reply_tokens``; None otherwise."""
        raw = self._redis.get(keys.model_reply(key))
        if raw is None:
            return None
        try:
            kept = json.loads(raw)
            found = Cached(reply=dict(kept["reply"]), usage=Usage.model_validate(kept["usage"]))
        except (ValueError, KeyError, TypeError):
            return None  # written by another covey, or torn: asked again, and kept anew
        return found if found.usage.completion_tokens <= reply_tokens else None

    def put(self, key: str, reply: dict[str, Any], usage: Usage) -> None:
        """Keep an answer (a reply that finished on its own) for ``ttl`` seconds."""
        if reply.get("finish_reason") not in KEPT_FINISHES:
            return
        body = {"reply": reply, "usage": usage.model_dump(exclude={"total_tokens", "cost_usd"})}
        self._redis.set(keys.model_reply(key), json.dumps(body), ex=self._ttl)
