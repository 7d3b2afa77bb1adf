"""One chat-completion request: its body in an endpoint's dialect, sent once through
the SDK, and its reply read whole or as a stream, each field checked.

covey posts a plain JSON body and reads the reply's JSON here:
``chat.completions.create`` and its parse cost a worker more than the rest of the
call against the in-process sim (``bench/model_call.py``), to walk covey's plain
JSON through the SDK's typed-parameter transform (which leaves it as it was) and
to build reply objects it does not check.

A request that reached the endpoint and was never answered may have been billed,
so it is charged the reservation and never sent again by the SDK (``Unretried``);
the SDK's retries are for what was refused (429, 5xx) or never sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
import openai
from openai import RequestOptions

from covey import wire
from covey.budgets.budget import MAX_COUNT
from covey.errors import CoveyError
from covey.models import stream
from covey.models.catalog import Endpoint, ModelParams
from covey.models.dialect import Dialect
from covey.models.replies import ModelReply, ToolCall
from covey.models.structured import asking
from covey.results import Usage
from covey.status import Cause, CauseKind

CHAT_PATH = "/chat/completions"
NOT_ANSWERED = "charged the reservation: no usage came back"
MESSAGE_CHARS = 300  # of a provider's error message: its first line, at most this long


class ModelError(CoveyError):
    """A model call that failed for good (after the SDK's retries); one clear line.

    ``cause`` says why as fields (its kind, the HTTP status, a rate limit's
    Retry-After). ``usage`` is what the call cost when the endpoint did answer,
    with a reply that cannot be used, or the reservation when it was sent and not
    answered (``unanswered``: it may be asked again, reserved anew): it is charged,
    never hidden."""

    def __init__(
        self, message: str, cause: Cause, usage: Usage | None = None, unanswered: bool = False, said: str = ""
    ) -> None:
        super().__init__(message)
        self.cause, self.usage, self.unanswered = cause, usage, unanswered
        self.said = said or message  # the provider's whole message, for what a refusal teaches

    @property
    def status(self) -> int | None:
        """The endpoint's HTTP status, when it answered with one."""
        return self.cause.status

    @property
    def rate_limited(self) -> bool:
        return self.cause.kind is CauseKind.RATE_LIMITED


class NoToolStream(ModelError):
    """A streamed request offering tools was answered with an empty stream: the
    server cannot stream a tool call it chose (``covey.models.dialect``)."""


class Unanswered(openai.APITimeoutError):
    """A request sent that timed out before its answer: it may have been billed.
    An ``OpenAIError`` raised by the transport, so the SDK passes it on unretried."""


class Unretried(httpx2.BaseTransport):
    """A transport whose read or write timeouts (the request was on its way or sent)
    are ``Unanswered``; connect and pool timeouts (nothing was sent) stay the SDK's to retry."""

    def __init__(self, transport: httpx2.BaseTransport) -> None:
        self._transport = transport

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = self._transport.handle_request(request)
        except (httpx2.ReadTimeout, httpx2.WriteTimeout) as e:
            raise Unanswered(request=request) from e
        if isinstance(response.stream, httpx2.SyncByteStream):  # a body that stalls was sent and left unanswered
            response.stream = _Body(response.stream, request)
        return response

    def close(self) -> None:
        self._transport.close()


class _Body(httpx2.SyncByteStream):
    """A response's body whose read timeouts are ``Unanswered``, as the headers' are."""

    def __init__(self, stream: httpx2.SyncByteStream, request: httpx2.Request) -> None:
        self._stream, self._request = stream, request

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._stream
        except httpx2.ReadTimeout as e:
            raise Unanswered(request=self._request) from e

    def close(self) -> None:
        self._stream.close()


@dataclass(frozen=True)
class ChatRequest:
    """One call as the worker asks it, before any dialect shapes its body.
    ``worst``: the usage reserved for it, charged when what it cost is unknown."""

    endpoint: Endpoint
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    max_tokens: int
    schema: dict[str, Any] | None
    schema_name: str
    params: ModelParams | None
    worst: Usage
    on_text: Callable[[str], None] | None = None  # shown each piece of the reply's text as it arrives

    def body(self, dialect: Dialect) -> dict[str, Any]:
        body = parameters(self.endpoint, self.params, self.max_tokens, dialect)
        messages, tools = self.messages, self.tools
        if self.schema is not None:
            messages, tools, asked = asking(dialect.structured, self.schema, self.schema_name, messages, tools)
            body.update(asked)
        body["messages"] = _sendable(messages, self.endpoint.tool_results == "user")
        if tools:
            body["tools"] = tools
            body.setdefault("tool_choice", "auto")  # some servers offer no tools unless told they may be called
        if self.streams(dialect):
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def streams(self, dialect: Dialect) -> bool:
        wanted = self.endpoint.streams or self.on_text is not None
        return wanted and (dialect.stream_tools or not self.tools)


def ask(client: openai.OpenAI, request: ChatRequest, dialect: Dialect, ends: float) -> tuple[ModelReply, Usage]:
    """Send ``request`` in ``dialect`` and read its reply by ``ends`` (``time.monotonic``);
    ``ModelError`` for every way it can fail, with what it is charged."""
    endpoint, worst = request.endpoint, request.worst
    seconds = max(0.001, ends - time.monotonic())
    failed = Cause(kind=CauseKind.MODEL_ERROR)
    malformed = Cause(kind=CauseKind.MALFORMED_REPLY)
    try:
        if request.streams(dialect):
            return _streamed(client, request, dialect, ends, seconds)
        response = client.post(
            CHAT_PATH, body=request.body(dialect), cast_to=httpx2.Response, options=_options(seconds)
        )
        completion = response.json()
    except (Unanswered, stream.StreamTimeout) as e:
        raise ModelError(f"model call timed out after {seconds:g}s; {NOT_ANSWERED}", failed, worst, True) from e
    except openai.APITimeoutError as e:  # could not connect in time: nothing was sent
        raise ModelError(f"model call timed out after {seconds:g}s connecting", _retried(failed, e)) from e
    except openai.APIStatusError as e:
        said = f"model call failed: HTTP {e.status_code}: "
        raise ModelError(said + _message(e), _retried(_status_cause(e), e), said=said + str(e.body)) from e
    except openai.APIConnectionError as e:
        raise ModelError(f"model unreachable at {_shown(endpoint.base_url)}: {e}", _retried(failed, e)) from e
    except openai.OpenAIError as e:
        raise ModelError(f"model call failed: {type(e).__name__}: {_first_line(str(e))}", failed) from e
    except (TypeError, ValueError) as e:  # an answer the SDK cannot parse (not JSON): billed, for all covey knows
        raise ModelError(f"model returned a malformed reply: {e}", malformed, worst) from e
    usage = _charged(_field(completion, "usage"), worst, worst, response.request)
    try:
        return _reply(completion), usage
    except (TypeError, ValueError) as e:
        raise ModelError(f"model returned a malformed reply: {e}", malformed, usage) from e


def _streamed(
    client: openai.OpenAI, request: ChatRequest, dialect: Dialect, ends: float, seconds: float
) -> tuple[ModelReply, Usage]:
    """The reply read as a stream, cut where it would pass ``request.max_tokens``
    (``covey.models.stream``). A read that times out mid-stream was answered in part:
    it is ``Unanswered``, as one that never started."""
    chunks = client.post(
        CHAT_PATH,
        body=request.body(dialect),
        cast_to=object,
        stream=True,
        stream_cls=openai.Stream[object],
        options=_options(seconds),
    )
    tokenizer = request.endpoint.tokenizer
    local = tokenizer if tokenizer is not None and not tokenizer.remote else None
    worst = request.worst
    try:
        got = stream.read(chunks, request.max_tokens, ends, local.count if local else None, on_text=request.on_text)
    except openai.APITimeoutError as e:
        raise Unanswered(request=chunks.response.request) from e
    except openai.APIConnectionError as e:
        cause = Cause(kind=CauseKind.MODEL_ERROR)
        raise ModelError(f"model reply broke off mid-stream: {e}; {NOT_ANSWERED}", cause, worst, True) from e
    except ValueError as e:
        if str(e) != "no choices" or not request.tools:
            raise
        cause = Cause(kind=CauseKind.MALFORMED_REPLY)
        raise NoToolStream("model answered a streamed request offering tools with no reply", cause) from e
    finally:
        chunks.close()
    if got.cut:  # the server passed the cap: what it generated is at least the reservation
        return got.reply, worst + Usage(model_retries=_retries_taken(chunks.response.request))
    received = got.received
    if got.usage is None and tokenizer is not None and tokenizer.remote:  # asked once, of the whole reply
        text = (got.reply.content or "") + "".join(call.arguments for call in got.reply.tool_calls)
        received = min(received, tokenizer.count(text))
    counted = Usage(prompt_tokens=worst.prompt_tokens, completion_tokens=received, cycles=1)
    return got.reply, _charged(got.usage, counted, worst, chunks.response.request)


def _charged(reported: Any, unreported: Usage, worst: Usage, sent: httpx2.Request) -> Usage:
    """What a call is charged: the ``usage`` the endpoint reported (``unreported``
    when it reported none) and the SDK's retries of ``sent``; ``ModelError`` charged
    ``worst`` for a usage no ledger could hold."""
    try:
        return _usage({"usage": reported}, unreported) + Usage(model_retries=_retries_taken(sent))
    except ValueError as e:  # charged as the worst case: what it really cost is unknown
        raise ModelError(f"model reported unusable usage: {e}", Cause(kind=CauseKind.MALFORMED_REPLY), worst) from e


def _sendable(messages: list[dict[str, Any]], results_as_user: bool) -> list[dict[str, Any]]:
    """The messages as every server takes them: an assistant turn that only calls
    tools has content ``""``, where some servers refuse ``null``. ``results_as_user``:
    each tool result becomes a user message naming its call, for a server whose chat
    template drops ``tool`` messages (llama-cpp-python's function-calling format)."""
    names = _call_names(messages) if results_as_user else {}
    sent = []
    for m in messages:
        if m.get("role") == "assistant" and m.get("content") is None:
            m = {**m, "content": ""}
        elif results_as_user and m.get("role") == "tool":
            m = {
                "role": "user",
                "content": f"The result of {names.get(m.get('tool_call_id')) or 'the tool'}: {m.get('content')}",
            }
        sent.append(m)
    return sent


def _call_names(messages: list[dict[str, Any]]) -> dict[Any, Any]:
    """The tool each call id of the conversation's assistant turns called."""
    return {
        call.get("id"): (call.get("function") or {}).get("name")
        for m in messages
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
        if isinstance(call, dict)
    }


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
    """The provider's error as one line: its message's first line (FastAPI's
    validation ``detail``: the first error, with how many more), never a dump."""
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return _first_line(str(inner["message"]))
        detail = body.get("detail")
        if isinstance(detail, list) and detail and isinstance(detail[0], dict):
            where = ".".join(str(part) for part in detail[0].get("loc", []))
            more = f" (and {len(detail) - 1} more)" if len(detail) > 1 else ""
            return _first_line(f"{where}: {detail[0].get('msg', '')}{more}")
        if isinstance(detail, str):
            return _first_line(detail)
    return _first_line(error.message)


def _first_line(text: str) -> str:
    return wire.cut(text.strip().splitlines()[0] if text.strip() else "", MESSAGE_CHARS)


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


def parameters(endpoint: Endpoint, params: ModelParams | None, max_tokens: int, dialect: Dialect) -> dict[str, Any]:
    """The server's own fields, a job's parameters over the models file's, and the
    reply cap under each name the endpoint reads."""
    given = {**endpoint.body, **endpoint.params.request(), **(params.request() if params else {})}
    return {**given, "model": endpoint.model, **dict.fromkeys(dialect.caps, max_tokens)}


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
