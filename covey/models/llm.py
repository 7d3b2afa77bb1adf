"""The model, always through the official ``openai`` SDK.

``sim`` runs the simulated model as an httpx transport inside this process; every
other name goes over HTTP to the endpoint the catalog (``covey.models.catalog``)
resolves it to. Either way the SDK's client sends the request (``covey.models.chat``),
with its headers, auth, retries and errors.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx2
import openai

from covey.config.settings import Settings
from covey.keys import RESERVATION_TTL_SECONDS
from covey.models import sim
from covey.models.catalog import Catalog, Endpoint, ModelParams, UnservableModel
from covey.models.chat import ChatRequest, ModelError, NoToolStream, Unretried, ask, parameters
from covey.models.dialect import DIALECTS, Dialect, Dialects
from covey.models.replies import ModelReply
from covey.models.structured import SCHEMA_NAME, answered
from covey.models.tokens import estimate_prompt_tokens
from covey.results import Usage
from covey.status import Cause, CauseKind

log = logging.getLogger(__name__)

SIM_BASE_URL = "http://sim.covey/v1"
# A fallback is asked only while the chain stays well inside a reservation's life.
CHAIN_SECONDS = RESERVATION_TTL_SECONDS / 2
# The SDK's own pool (1000 connections, 100 kept alive), for the transport covey wraps.
POOL_LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)


class LLM:
    """One SDK client per model endpoint, shared by the worker's threads.

    ``transport`` carries the calls to remote endpoints (the network by default;
    a test passes an ``httpx2.MockTransport``). ``dialects``: what each endpoint has
    been learnt to take, the worker process's by default."""

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog | None = None,
        transport: httpx2.BaseTransport | None = None,
        dialects: Dialects | None = None,
    ) -> None:
        self._settings = settings
        self.catalog = catalog or Catalog.from_settings(settings)
        self._transport = transport
        self._clients: dict[tuple[str | None, str | None], openai.OpenAI] = {}
        self._lock = threading.Lock()
        self.dialects = dialects or DIALECTS

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
        on_text: Callable[[str], None] | None = None,
    ) -> tuple[ModelReply, Usage]:
        """One chat completion of ``model`` (a covey name); ``schema`` asks for a JSON
        answer matching it; ``params`` override the models file's for this call;
        ``on_text`` is handed the reply's text as it arrives (the call is streamed).
        ``prompt_reserved``: the prompt tokens reserved for it, charged (with
        ``max_tokens``) when what it cost is unknown; its bytes when not given.

        A call sent and never answered (it timed out) is charged that reservation
        and not sent again here: asking again is a new call, reserved anew
        (``covey.worker.calls``). One refused for a parameter its endpoint does not
        take is asked again once in the dialect the refusal teaches (``covey.models.dialect``).

        A call whose retries end for want of a server (a 429, a 5xx, no connection),
        charged nothing, is asked of the model's ``fallbacks`` in turn, each within
        a model timeout of its own (the whole chain within a reservation's life, or
        a deadline's); the reply names the one that answered (``ModelReply.model``)."""
        worst = Usage(
            prompt_tokens=estimate_prompt_tokens(messages, tools) if prompt_reserved is None else prompt_reserved,
            completion_tokens=max_tokens,
            cycles=1,
        )
        try:
            chain = self.catalog.chain(model)
        except UnservableModel as e:
            raise ModelError(str(e), Cause(kind=CauseKind.INVALID_SPEC)) from e
        # Never wait past the model timeout, even with a far deadline: a reservation
        # outliving RESERVATION_TTL_SECONDS would be released while still in use. A
        # nearer deadline bounds the whole call, so it gets one attempt, no retries.
        deadline_bound = timeout is not None and timeout < self._settings.model_timeout
        seconds = timeout if deadline_bound and timeout is not None else self._settings.model_timeout
        retries = 0 if deadline_bound else self._settings.model_retries
        started = time.monotonic()
        for index, (name, endpoint) in enumerate(chain):
            # A deadline's one window is shared by the chain; else each gets its own.
            ends = started + seconds if deadline_bound or index == 0 else time.monotonic() + seconds
            request = ChatRequest(endpoint, messages, tools, max_tokens, schema, schema_name, params, worst, on_text)
            try:
                reply, usage = self._asked(name, endpoint, request, retries, ends)
            except ModelError as e:
                if index == len(chain) - 1 or not _falls_back(e) or time.monotonic() >= started + CHAIN_SECONDS:
                    raise
                log.warning("model %s: %s; asking its fallback %s", name, e, chain[index + 1][0])
                continue
            return (reply if index == 0 else replace(reply, model=name)), usage
        raise AssertionError("a chain holds its model")  # the loop returns or raises

    def _asked(
        self, name: str, endpoint: Endpoint, request: ChatRequest, retries: int, ends: float
    ) -> tuple[ModelReply, Usage]:
        """One endpoint's answer, asked again once in the dialect a refusal teaches."""
        client = self._client(endpoint)
        if retries != client.max_retries:  # a copy of the client: only for a deadline's single attempt
            client = client.with_options(max_retries=retries)
        dialect = self.dialects.of(endpoint)
        try:
            reply, usage = ask(client, request, dialect, ends)
        except ModelError as e:
            taught = _taught(e, dialect, request.schema is not None)
            if taught is None:
                raise
            dialect, change = taught
            self.dialects.learn(endpoint, dialect)
            log.warning("model %s: %s; from now on this worker %s", name, e, change)
            reply, usage = ask(client, request, dialect, ends)
        if request.schema is None:
            return reply, usage
        return answered(dialect.structured, request.schema_name, reply), usage

    def identity(self, model: str) -> str:
        """Where ``model``'s calls go: its endpoint's URL (``sim`` for the in-process sim)."""
        try:
            return self.catalog.endpoint(model).base_url or "sim"
        except UnservableModel:
            return ""

    def parameters(self, model: str, params: ModelParams | None, max_tokens: int) -> dict[str, Any]:
        """What a call of ``model`` sends besides its messages and tools (the provider's
        model id and the request parameters); empty for a model this worker cannot serve."""
        try:
            endpoint = self.catalog.endpoint(model)
        except UnservableModel:
            return {}
        return parameters(endpoint, params, max_tokens, self.dialects.of(endpoint))

    def _client(self, endpoint: Endpoint) -> openai.OpenAI:
        key = (endpoint.base_url, endpoint.key_env)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = self._make(endpoint)
            return self._clients[key]

    def _make(self, endpoint: Endpoint) -> openai.OpenAI:
        s = self._settings
        if endpoint.in_process:
            http = httpx2.Client(transport=Unretried(sim.transport(latency_ms=s.sim_latency_ms)))
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
        network = self._transport or httpx2.HTTPTransport(limits=POOL_LIMITS)
        http = openai.DefaultHttpxClient(transport=Unretried(network))
        # A local endpoint may take no key, but the SDK insists on one.
        api_key = endpoint.api_key or "none"
        return openai.OpenAI(
            api_key=api_key,
            base_url=endpoint.base_url,
            http_client=http,
            max_retries=s.model_retries,
            timeout=s.model_timeout,
        )


def _falls_back(error: ModelError) -> bool:
    """Whether a fallback may answer instead: the endpoint was busy, broken or away
    (a 429, a 5xx, no connection) and the call cost nothing. A call sent and not
    answered was charged its reservation (the provider may bill it): asking
    another model too could spend past it."""
    if error.usage is not None or error.unanswered:
        return False
    return error.status is None or error.status == 429 or error.status >= 500


def _taught(error: ModelError, dialect: Dialect, structured: bool) -> tuple[Dialect, str] | None:
    """The dialect a failed call teaches its endpoint, and what changed; None for a failure that teaches nothing."""
    if isinstance(error, NoToolStream):
        return replace(dialect, stream_tools=False), "asks requests offering tools unstreamed"
    if error.status is None or error.status < 400 or error.status == 429:
        return None
    return dialect.refused(error.said, structured)
