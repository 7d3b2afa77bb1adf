"""The model, always through the official ``openai`` SDK.

``sim`` runs the simulated model as an httpx transport inside this process; every
other name goes over HTTP to the endpoint the catalog (``covey.models.catalog``)
resolves it to. Either way the SDK's client sends the request, with its headers,
auth, retries and errors. It posts a plain JSON body, and the reply's JSON is read
here, each field checked: ``chat.completions.create`` and its parse cost a worker
more than the rest of the call against the in-process sim (``bench/model_call.py``),
to walk covey's plain JSON through the SDK's typed-parameter transform (which
leaves it as it was) and to build reply objects it does not check.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
import openai
from openai import RequestOptions

from covey.budgets.budget import MAX_COUNT
from covey.config.settings import Settings
from covey.errors import CoveyError
from covey.models import sim
from covey.models.catalog import Catalog, Endpoint, ModelParams, UnservableModel
from covey.models.replies import ModelReply, ToolCall
from covey.models.structured import SCHEMA_NAME, answered, asking
from covey.models.tokens import estimate_prompt_tokens
from covey.results import Usage
from covey.status import Cause, CauseKind

SIM_BASE_URL = "http://sim.covey/v1"
CHAT_PATH = "/chat/completions"


class ModelError(CoveyError):
    """A model call that failed for good (after the SDK's retries); one clear line.

    ``cause`` says why as fields (its kind, the HTTP status, a rate limit's
    Retry-After). ``usage`` is what the call cost when the endpoint did answer,
    with a reply that cannot be used: it is charged, never hidden."""

    def __init__(self, message: str, cause: Cause, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.cause, self.usage = cause, usage

    @property
    def status(self) -> int | None:
        """The endpoint's HTTP status, when it answered with one."""
        return self.cause.status

    @property
    def rate_limited(self) -> bool:
        return self.cause.kind is CauseKind.RATE_LIMITED


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
        prompt_reserved: int | None = None,
    ) -> tuple[ModelReply, Usage]:
        """One chat completion of ``model`` (a covey name); ``schema`` asks for a JSON
        answer matching it; ``params`` override the models file's for this call.
        ``prompt_reserved``: the prompt tokens reserved for it, charged (with
        ``max_tokens``) when what it cost is unknown; its bytes when not given."""
        worst = Usage(
            prompt_tokens=estimate_prompt_tokens(messages, tools) if prompt_reserved is None else prompt_reserved,
            completion_tokens=max_tokens,
            cycles=1,
        )
        try:
            endpoint = self.catalog.endpoint(model)
        except UnservableModel as e:
            raise ModelError(str(e), Cause(kind=CauseKind.INVALID_SPEC)) from e
        client = self._client(endpoint)
        body = _parameters(endpoint, params, max_tokens)
        if schema is not None:
            messages, tools, asked = asking(endpoint.structured, schema, schema_name, messages, tools)
            body.update(asked)
        body["messages"] = messages
        if tools:
            body["tools"] = tools
        # Never wait past the model timeout, even with a far deadline: a reservation
        # outliving RESERVATION_TTL_SECONDS would be released while still in use. A
        # nearer deadline bounds the whole call, so it gets one attempt, no retries.
        deadline_bound = timeout is not None and timeout < self._settings.model_timeout
        per_attempt = timeout if deadline_bound else self._settings.model_timeout
        retries = 0 if deadline_bound else self._settings.model_retries
        if retries != client.max_retries:  # a copy of the client: only for a deadline's single attempt
            client = client.with_options(max_retries=retries)
        failed = Cause(kind=CauseKind.MODEL_ERROR)
        malformed = Cause(kind=CauseKind.MALFORMED_REPLY)
        try:
            response = client.post(CHAT_PATH, body=body, cast_to=httpx2.Response, options=_options(per_attempt))
            completion = response.json()
        except openai.APITimeoutError as e:
            raise ModelError(
                f"model call timed out after {per_attempt:g}s (and {retries} retries)", _retried(failed, e)
            ) from e
        except openai.APIStatusError as e:
            raise ModelError(
                f"model call failed: HTTP {e.status_code}: {_message(e)}", _retried(_status_cause(e), e)
            ) from e
        except openai.APIConnectionError as e:
            raise ModelError(f"model unreachable at {_shown(endpoint.base_url)}: {e}", _retried(failed, e)) from e
        except openai.OpenAIError as e:
            raise ModelError(f"model call failed: {type(e).__name__}: {e}", failed) from e
        except ValueError as e:  # an answer the SDK cannot parse (not JSON): billed, for all covey knows
            raise ModelError(f"model returned a malformed reply: {e}", malformed, worst) from e
        try:
            usage = _usage(completion, worst) + Usage(model_retries=_retries_taken(response.request))
        except ValueError as e:  # charged as the worst case: what it really cost is unknown
            raise ModelError(f"model reported unusable usage: {e}", malformed, worst) from e
        try:
            reply = _reply(completion)
        except (TypeError, ValueError) as e:
            raise ModelError(f"model returned a malformed reply: {e}", malformed, usage) from e
        return (reply if schema is None else answered(endpoint.structured, schema_name, reply)), usage

    def parameters(self, model: str, params: ModelParams | None, max_tokens: int) -> dict[str, Any]:
        """What a call of ``model`` sends besides its messages and tools (the provider's
        model id and the request parameters); empty for a model this worker cannot serve."""
        try:
            return _parameters(self.catalog.endpoint(model), params, max_tokens)
        except UnservableModel:
            return {}

    def _client(self, endpoint: Endpoint) -> openai.OpenAI:
        key = (endpoint.base_url, endpoint.key_env)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = self._make(endpoint)
            return self._clients[key]

    def _make(self, endpoint: Endpoint) -> openai.OpenAI:
        s = self._settings
        if endpoint.in_process:
            http = httpx2.Client(transport=sim.transport(latency_ms=s.sim_latency_ms))
            return openai.OpenAI(
                api_key="sim",
                base_url=SIM_BASE_URL,
                http_client=http,
                max_retries=s.model_retries,
                timeout=s.model_timeout,
            )
        # The SDK's pool (1000 connections, 100 kept alive) is not capped at
        # COVEY_WORKER_CONCURRENCY: `covey worker --concurrency` may run more threads,
        # and a thread waiting for a pooled connection would spend its call's timeout.
        http = openai.DefaultHttpxClient(transport=self._transport)
        # A local endpoint may take no key, but the SDK insists on one.
        api_key = endpoint.api_key or "none"
        return openai.OpenAI(
            api_key=api_key,
            base_url=endpoint.base_url,
            http_client=http,
            max_retries=s.model_retries,
            timeout=s.model_timeout,
        )


def _status_cause(error: openai.APIStatusError) -> Cause:
    """An HTTP error's cause: ``rate_limited`` for a 429, with the wait it asked for."""
    if error.status_code != 429:
        return Cause(kind=CauseKind.MODEL_ERROR, status=error.status_code)
    return Cause(kind=CauseKind.RATE_LIMITED, status=429, retry_after=_retry_after(error.response.headers))


def _retried(cause: Cause, error: openai.APIError) -> Cause:
    """``cause`` with the retries the SDK took before giving up."""
    taken = _retries_taken(error.request)
    return cause.model_copy(update={"retries": taken}) if taken > 0 else cause


def _retries_taken(request: httpx2.Request) -> int:
    """The retries the SDK took before the attempt that sent ``request``: it says so
    only in a header it numbers every attempt with."""
    try:
        return int(request.headers.get("x-stainless-retry-count", "0"))
    except ValueError:
        return 0


def _retry_after(headers: httpx2.Headers) -> float | None:
    """Seconds from ``retry-after-ms`` (OpenAI's) or ``retry-after``; None for neither, or an HTTP date."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            return float(headers[name]) / scale
        except (KeyError, ValueError):
            continue
    return None


def _shown(base_url: str | None) -> str:
    """The endpoint as a person may see it: no user, password or query (a key may sit there)."""
    if base_url is None:
        return "the in-process sim"
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def _message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return error.message


def _reply(completion: Any) -> ModelReply:
    """The reply, checked: a field of the wrong type raises here (``ValueError``,
    ``TypeError``) rather than deep in a strategy."""
    choices = _field(completion, "choices")
    if not choices:
        raise ValueError("no choices")
    if not isinstance(choices, list):
        raise TypeError(f"choices is a {type(choices).__name__}, not a list")
    choice = choices[0]
    message = _field(choice, "message")
    if not isinstance(message, dict):
        raise TypeError(f"message is a {type(message).__name__}, not an object")
    content = _text_or_none(message.get("content"), "content")
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise TypeError(f"tool_calls is a {type(raw_calls).__name__}, not a list")
    calls = [
        ToolCall(
            id=_text_or_none(_field(c, "id"), "tool call id") or "",
            name=_text_or_none(_field(function, "name"), "tool call name") or "",
            arguments=_text_or_none(_field(function, "arguments"), "tool call arguments") or "",
        )
        for c in raw_calls
        if (function := _field(c, "function")) is not None
    ]
    # An endpoint that leaves finish_reason out said nothing of a cut: take it as stopped.
    finish_reason = _text_or_none(_field(choice, "finish_reason"), "finish_reason") or "stop"
    return ModelReply(content=content, tool_calls=calls, finish_reason=finish_reason)


def _field(value: Any, name: str) -> Any:
    """``value[name]`` of a JSON object; None when it lacks one or is no object."""
    return value.get(name) if isinstance(value, dict) else None


def _text_or_none(value: Any, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{what} is a {type(value).__name__}, not text")
    return value


def _parameters(endpoint: Endpoint, params: ModelParams | None, max_tokens: int) -> dict[str, Any]:
    """A job's parameters over the models file's; max_completion_tokens is OpenAI's
    current name (reasoning models refuse max_tokens)."""
    given = {**endpoint.params.request(), **(params.request() if params else {})}
    return {**given, "model": endpoint.model, "max_completion_tokens": max_tokens}


def _options(timeout: float | None) -> RequestOptions:
    """The SDK's options for one attempt of a chat completion, with the bearer key
    its own ``chat.completions.create`` sends."""
    return {"timeout": timeout, "security": {"bearer_auth": True}}


def _usage(completion: Any, worst: Usage) -> Usage:
    """One call's spend: one cycle and the tokens the endpoint reported, or the worst
    case the call was allowed when it reports none. ``ValueError`` when a count is
    not a whole number from 0 to ``MAX_COUNT`` (no ledger could hold it)."""
    usage = _field(completion, "usage")
    if usage is None:  # some endpoints omit usage: charge the worst case the call was allowed
        return worst
    counts: dict[str, int] = {}
    for name in ("prompt_tokens", "completion_tokens"):
        count = _field(usage, name)
        if type(count) is not int or not 0 <= count <= MAX_COUNT:
            raise ValueError(f"{name}={count!r}")
        counts[name] = count
    # Cached prompt tokens are billed at their own price; an endpoint that says nothing of them cached none.
    cached = _field(_field(usage, "prompt_tokens_details"), "cached_tokens") or 0
    if type(cached) is not int or not 0 <= cached <= counts["prompt_tokens"]:
        raise ValueError(f"prompt_tokens_details.cached_tokens={cached!r}")
    return Usage(**counts, cached_tokens=cached, cycles=1)
