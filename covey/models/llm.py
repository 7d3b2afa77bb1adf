"""The model, always through the official ``openai`` SDK.

``sim`` without a base URL runs the simulated model as an httpx transport inside
this process; with ``COVEY_OPENAI_BASE_URL`` every model, ``sim`` included, goes
over HTTP. Either way the SDK's own request, retry and parsing path runs.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx2
import openai

from covey.config.settings import Settings
from covey.orchestration.actions import ModelReply, ToolCall
from covey.results import Usage
from covey.models import sim
from covey.models.structured import SCHEMA_NAME, response_format
from covey.models.tokens import estimate_prompt_tokens

SIM_MODEL = "sim"
SIM_BASE_URL = "http://sim.covey/v1"


class ModelError(Exception):
    """A model call that failed for good (after the SDK's retries); one clear line."""


class LLM:
    """One SDK client per model endpoint, shared by the worker's threads."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._clients: dict[str, openai.OpenAI] = {}
        self._lock = threading.Lock()

    def call(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        max_tokens: int,
        timeout: float | None = None,
        schema: dict[str, Any] | None = None,
        schema_name: str = SCHEMA_NAME,
    ) -> tuple[ModelReply, Usage]:
        """One chat completion; ``schema`` asks for a JSON answer matching it."""
        client = self._client(model)
        # max_completion_tokens: OpenAI's current name; reasoning models refuse max_tokens.
        kwargs: dict[str, Any] = {"model": model, "messages": messages, "max_completion_tokens": max_tokens}
        if tools:
            kwargs["tools"] = tools
        if schema is not None:
            kwargs["response_format"] = response_format(schema, schema_name)
        # Never wait past the model timeout, even with a far deadline: a reservation
        # outliving RESERVATION_TTL_SECONDS would be released while still in use.
        per_attempt = min(timeout, self._settings.model_timeout) if timeout else self._settings.model_timeout
        try:
            completion = client.with_options(timeout=per_attempt).chat.completions.create(**kwargs)
        except openai.APITimeoutError as e:
            raise ModelError(f"model call timed out (after {self._settings.model_retries} retries)") from e
        except openai.APIStatusError as e:
            raise ModelError(f"model call failed: HTTP {e.status_code}: {_message(e)}") from e
        except openai.APIConnectionError as e:
            raise ModelError(f"model unreachable: {e}") from e
        except openai.OpenAIError as e:
            raise ModelError(f"model call failed: {type(e).__name__}: {e}") from e
        return _reply(completion), _usage(completion, messages, tools, max_tokens)

    def _client(self, model: str) -> openai.OpenAI:
        key = SIM_MODEL if model == SIM_MODEL and not self._settings.openai_base_url else "remote"
        with self._lock:
            if key not in self._clients:
                self._clients[key] = self._make(key)
            return self._clients[key]

    def _make(self, key: str) -> openai.OpenAI:
        s = self._settings
        common = {"max_retries": s.model_retries, "timeout": s.model_timeout}
        if key == SIM_MODEL:
            http = httpx2.Client(transport=sim.transport(latency_ms=s.sim_latency_ms))
            return openai.OpenAI(api_key="sim", base_url=SIM_BASE_URL, http_client=http, **common)
        if not s.openai_api_key and not s.openai_base_url:
            raise ModelError("no model endpoint: set OPENAI_API_KEY (or COVEY_OPENAI_BASE_URL) on the worker")
        return openai.OpenAI(api_key=s.openai_api_key or "none", base_url=s.openai_base_url, **common)


def _message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return error.message


def _reply(completion: Any) -> ModelReply:
    if not completion.choices:
        raise ModelError("model returned no choices")
    choice = completion.choices[0]
    calls = [
        ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments or "")
        for c in choice.message.tool_calls or []
        if getattr(c, "function", None) is not None
    ]
    # An endpoint that leaves finish_reason out said nothing of a cut: take it as stopped.
    return ModelReply(content=choice.message.content, tool_calls=calls, finish_reason=choice.finish_reason or "stop")


def _usage(completion: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int) -> Usage:
    """One call's spend: one cycle and the tokens the endpoint reported."""
    usage = completion.usage
    if usage is None:  # some endpoints omit usage: charge the worst case the call was allowed
        return Usage(prompt_tokens=estimate_prompt_tokens(messages, tools), completion_tokens=max_tokens, cycles=1)
    return Usage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens, cycles=1)
