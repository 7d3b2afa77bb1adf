"""The model, always through the official ``openai`` SDK.

``sim`` runs the simulated model as an httpx transport inside this process; every
other name goes over HTTP to the endpoint the catalog (``covey.models.catalog``)
resolves it to. Either way the SDK's own request, retry and parsing path runs.
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
from covey.models.catalog import Catalog, Endpoint, ModelParams, UnservableModel
from covey.models.structured import SCHEMA_NAME, response_format
from covey.models.tokens import estimate_prompt_tokens

SIM_BASE_URL = "http://sim.covey/v1"


class ModelError(Exception):
    """A model call that failed for good (after the SDK's retries); one clear line."""


class LLM:
    """One SDK client per model endpoint, shared by the worker's threads.

    ``transport`` carries the calls to remote endpoints (the network by default;
    a test passes an ``httpx2.MockTransport``)."""

    def __init__(
        self, settings: Settings, catalog: Catalog | None = None, transport: httpx2.BaseTransport | None = None
    ) -> None:
        self._settings = settings
        self.catalog = catalog or Catalog.from_settings(settings)
        self._transport = transport
        self._clients: dict[tuple[str | None, str | None], openai.OpenAI] = {}
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
        params: ModelParams | None = None,
    ) -> tuple[ModelReply, Usage]:
        """One chat completion of ``model`` (a covey name); ``schema`` asks for a JSON
        answer matching it; ``params`` override the models file's for this call."""
        try:
            endpoint = self.catalog.endpoint(model)
        except UnservableModel as e:
            raise ModelError(str(e)) from e
        client = self._client(endpoint)
        kwargs: dict[str, Any] = {**endpoint.params.request(), **(params.request() if params else {})}
        # max_completion_tokens: OpenAI's current name; reasoning models refuse max_tokens.
        kwargs.update(model=endpoint.model, messages=messages, max_completion_tokens=max_tokens)
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

    def _client(self, endpoint: Endpoint) -> openai.OpenAI:
        key = (endpoint.base_url, endpoint.key_env)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = self._make(endpoint)
            return self._clients[key]

    def _make(self, endpoint: Endpoint) -> openai.OpenAI:
        s = self._settings
        common = {"max_retries": s.model_retries, "timeout": s.model_timeout}
        if endpoint.in_process:
            http = httpx2.Client(transport=sim.transport(latency_ms=s.sim_latency_ms))
            return openai.OpenAI(api_key="sim", base_url=SIM_BASE_URL, http_client=http, **common)
        # The SDK's pool (1000 connections, 100 kept alive) is not capped at
        # COVEY_WORKER_CONCURRENCY: `covey worker --concurrency` may run more threads,
        # and a thread waiting for a pooled connection would spend its call's timeout.
        http = openai.DefaultHttpxClient(transport=self._transport)
        # A local endpoint may take no key, but the SDK insists on one.
        api_key = endpoint.api_key or "none"
        return openai.OpenAI(api_key=api_key, base_url=endpoint.base_url, http_client=http, **common)


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
