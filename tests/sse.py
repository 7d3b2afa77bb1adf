"""A test endpoint's chat.completion body, answered as the request asks: whole, or
as the server-sent events of a stream (``"stream": true``), the way OpenAI streams
it: the message in one delta, the finish, then the usage when there is one."""

from __future__ import annotations

import json
from typing import Any

import httpx2


def answer(request: httpx2.Request, body: Any) -> httpx2.Response:
    """``body`` whole, or streamed when the request asks for a stream."""
    if not json.loads(request.content).get("stream"):
        return httpx2.Response(200, json=body)
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=events(body))


def events(body: Any) -> bytes:
    """``body``'s choices and usage as ``chat.completion.chunk`` events; a body that is
    no object is sent as one event's data, as a broken server would."""
    if not isinstance(body, dict):
        return f"data: {json.dumps(body)}\n\ndata: [DONE]\n\n".encode()
    chunks: list[dict[str, Any]] = []
    for choice in body.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else choice
        delta = dict(message) if isinstance(message, dict) else message
        if isinstance(delta, dict) and isinstance(delta.get("tool_calls"), list):
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(delta["tool_calls"])]
        chunks.append({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason")}]})
    if body.get("usage") is not None:
        chunks.append({"choices": [], "usage": body["usage"]})
    return ("".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n").encode()
