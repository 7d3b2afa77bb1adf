"""``sim``: a deterministic OpenAI chat-completions model, as an httpx2 handler.

Plugged into the real OpenAI SDK as a transport (``transport()``) or served over
HTTP (``covey.models.sim.server``), so the worker's code path is the same for
``sim`` and a real endpoint. What it replies is scripted by ``[sim:...]``
directives in the task text (see ``covey.models.sim.directives``) and read from
the conversation so far; the same request always gets the same response.
Sleeping is the only side effect, and the sleep function is injectable.

A ``json_schema`` or ``json_object`` ``response_format`` is answered with a JSON
document (``covey.models.sim.structured``): at once, or when the request also
offers tools, after the task's own tool call. A reply longer than the
request's ``max_tokens``/``max_completion_tokens`` is cut the way the real API cuts
it, so the worker's handling of ``finish_reason="length"`` meets realistic input
(unless ``[sim:uncapped]`` has it ignore the cap). A ``stream`` request is answered
as server-sent events: the content a billed token a chunk, each tool call in one,
and the usage in a last chunk when ``stream_options.include_usage`` asks for it;
its latency is spent half before the first chunk and half spread between them,
as a model generating its reply would.

Content parts are read as text, each image described by its type, pixels and
bytes (``covey.parts.readable``), so a task's image shows in its answer; an image
shown after the task (a tool's) is named at the end of the answer.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2

from covey import parts, wire
from covey.models.sim import directives as sim_directives
from covey.models.sim import structured
from covey.models.sim.directives import Call, DirectiveError, Directives, echoed
from covey.models.sim.scripted import SCRIPTS, Prompt
from covey.models.tokens import prompt_text

__all__ = ["is_chat_completion", "make_handler", "transport"]

CREATED = 1_700_000_000  # a fixed timestamp keeps responses byte-for-byte deterministic
RETRY_AFTER_MS = "20"  # short, so the SDK's retry after a scripted failure is fast
BAD_ARGUMENTS = '{"expression": "1+'  # deliberately not JSON
BAD_JSON = '{"unexpected": true}'  # valid JSON, lacking the required properties of a schema's object
_LEAVES = re.compile(r"leaves=(\d+)")
_HISTORY = re.compile(re.escape(wire.HISTORY).replace(re.escape("{}"), r"(\d+)"))


class _BadRequest(ValueError):
    """A request the sim cannot answer; becomes an HTTP 400."""


@dataclass(frozen=True)
class _Chat:
    """The parts of a chat-completions request the sim reads."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    max_tokens: int | None
    output: str  # the response_format type: "text", "json_object" or "json_schema"
    schema: dict[str, Any] | None  # a json_schema response_format's schema
    schema_name: str | None  # ...and its name, which picks a strategy script
    stream: bool = False
    stream_usage: bool = False  # stream_options.include_usage

    @classmethod
    def from_body(cls, raw: bytes) -> _Chat:
        try:
            body = json.loads(raw)
        except ValueError as e:
            raise _BadRequest(f"request body is not JSON: {e}") from e
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise _BadRequest("'messages' must be a list of message objects")
        caps = [body[k] for k in ("max_tokens", "max_completion_tokens") if body.get(k) is not None]
        tools = list(body.get("tools") or [])
        output, schema, name = _output_format(body.get("response_format"))
        options = body.get("stream_options")
        return cls(
            str(body.get("model", "sim")),
            messages,
            tools,
            min(caps, default=None),
            output,
            schema,
            name,
            stream=body.get("stream") is True,
            stream_usage=isinstance(options, dict) and options.get("include_usage") is True,
        )

    @property
    def task(self) -> str:
        """The first user message after the conversation the system message says comes before it."""
        for message in self.messages[self._before() :]:
            if message.get("role") == "user":
                return _text(message.get("content"))
        raise _BadRequest("no 'user' message: the sim reads its task from the first one")

    def recalled(self) -> str:
        """The last answer of the conversation before the task."""
        said = [m for m in self.messages[1 : self._before()] if m.get("role") == "assistant"]
        return _text(said[-1].get("content")) if said else "nothing to recall"

    def _before(self) -> int:
        """Where the new task's part of the conversation starts (after a session's turns)."""
        if not self.messages or self.messages[0].get("role") != "system":
            return 0
        said = _HISTORY.search(_text(self.messages[0].get("content")))
        return 1 + int(said[1]) if said else 0

    @property
    def last_user(self) -> str:
        """The last ``user`` message: what this call asks, when it is not the task itself."""
        users = [m for m in self.messages if m.get("role") == "user"]
        return _text(users[-1].get("content")) if users else ""

    def images_shown(self) -> list[str]:
        """Each image of a user message after the task's (a tool's), described."""
        at = self._before()
        users = [i for i, m in enumerate(self.messages) if i >= at and m.get("role") == "user"]
        later = [self.messages[i].get("content") for i in users[1:]]
        return [parts.described(url) for url in parts.images(later)]

    @property
    def first_call(self) -> bool:
        return not any(m.get("role") == "assistant" for m in self.messages)

    @property
    def tool_names(self) -> set[str]:
        return {t.get("function", {}).get("name") for t in self.tools}

    def results_of(self, tool: str) -> list[str]:
        """Contents of the ``tool`` messages answering earlier calls to ``tool``."""
        ids = {
            call.get("id")
            for m in self.messages
            if m.get("role") == "assistant"
            for call in m.get("tool_calls") or []
            if call.get("function", {}).get("name") == tool
        }
        answers = (m for m in self.messages if m.get("role") == "tool" and m.get("tool_call_id") in ids)
        return [_text(m.get("content")) for m in answers]


def _output_format(response_format: Any) -> tuple[str, dict[str, Any] | None, str | None]:
    """The ``response_format`` type, with the schema and name of a ``json_schema`` one."""
    if response_format is None:
        return "text", None, None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind not in ("text", "json_object", "json_schema"):
        raise _BadRequest("'response_format' must have a 'type' of text, json_object or json_schema")
    if kind != "json_schema":
        return kind, None, None
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        raise _BadRequest("a json_schema 'response_format' needs 'json_schema': {'schema': {...}}")
    return kind, schema, str(spec.get("name") or "")


@dataclass(frozen=True)
class _Reply:
    """An assistant message: plain content, or tool calls as (name, arguments JSON)."""

    content: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)

    @property
    def text(self) -> str:
        """What the model generates: the content, or the calls' arguments one after another."""
        return self.content if self.content is not None else "".join(args for _, args in self.tool_calls)

    def cut(self, chars: int) -> _Reply:
        """The reply as far as ``chars`` characters of ``text`` got: the content cut, or the
        whole calls in order, then the one being generated with its arguments cut short
        (so not JSON), and none after it."""
        if self.content is not None:
            return _Reply(content=self.content[:chars])
        kept = []
        for name, args in self.tool_calls:
            kept.append((name, args[:chars]))
            if len(args) > chars:
                break
            chars -= len(args)
        return _Reply(tool_calls=kept)


def make_handler(
    latency_ms: int = 0, *, sleep: Callable[[float], None] = time.sleep
) -> Callable[[httpx2.Request], httpx2.Response]:
    """A handler serving ``POST .../chat/completions``; every other route is a 404.

    ``latency_ms`` is added to every call, on top of any ``[sim:latency MS]``.
    A ``[sim:fail timeout]`` raises ``httpx2.ReadTimeout`` from the handler; the HTTP
    server turns that into a stall the client times out on.
    """

    def handle(request: httpx2.Request) -> httpx2.Response:
        if not is_chat_completion(request):
            route = f"{request.method} {request.url.path}"
            return _error(404, f"sim: no route for {route}", "invalid_request_error", "not_found")
        try:
            chat = _Chat.from_body(request.read())
            directives = sim_directives.parse(chat.task)
        except (_BadRequest, DirectiveError) as e:
            return _error(400, f"sim: {e}", "invalid_request_error", "invalid_request")
        latency = (latency_ms + directives.latency_ms) / 1000
        spread = latency / 2 if chat.stream else 0.0  # a stream's chunks come over the second half
        if latency:
            _wait(request, latency - spread, sleep)
        pace = _Pace(spread, sleep)
        if directives.fail is not None and _failing(chat, directives):
            failed = _fail(directives, request)
            if isinstance(failed, httpx2.Response):
                return failed
            if failed is not None:
                return _completion(chat, failed, directives, pace)
        try:
            reply = _decide(chat, directives)
        except (_BadRequest, DirectiveError) as e:  # a strategy script's malformed [sim:NAME ARGS], a call not offered
            return _error(400, f"sim: {e}", "invalid_request_error", "invalid_request")
        return _completion(chat, reply, directives, pace)

    return handle


@dataclass(frozen=True)
class _Pace:
    """How long a streamed reply takes from its first chunk to its last."""

    seconds: float
    sleep: Callable[[float], None]

    def spread(self, chunks: list[str]) -> Iterator[bytes]:
        for chunk in chunks:
            self.sleep(self.seconds / len(chunks))
            yield chunk.encode()


def _wait(request: httpx2.Request, seconds: float, sleep: Callable[[float], None]) -> None:
    """Take ``seconds`` to answer, as a slow endpoint would; past the client's read
    timeout (the SDK sends it as a header) the client has given up: time out then."""
    try:
        read_timeout = float(request.headers.get("x-stainless-read-timeout", "inf"))
    except ValueError:
        read_timeout = float("inf")
    if seconds <= read_timeout:
        sleep(seconds)
        return
    sleep(read_timeout)
    raise httpx2.ReadTimeout("sim: the reply took longer than the client's read timeout", request=request)


def is_chat_completion(request: httpx2.Request) -> bool:
    """Whether ``request`` is a ``POST .../chat/completions``, the one route the sim serves."""
    return request.method == "POST" and request.url.path.endswith("/chat/completions")


def transport(latency_ms: int = 0) -> httpx2.MockTransport:
    """An in-process transport for ``httpx2.Client(transport=transport())``."""
    return httpx2.MockTransport(make_handler(latency_ms))


def _failing(chat: _Chat, directives: Directives) -> bool:
    """Whether this call meets the scripted failure: a first call (no assistant turn
    yet), except that a bare ``bad_json`` also fails every structured call, and
    ``bad_json once`` only the first ask of a structured call, so asked again it is right."""
    if directives.fail != "bad_json":
        return chat.first_call
    structured = chat.output != "text"
    if directives.fail_once:
        return structured and chat.first_call
    return chat.first_call or structured


def _fail(directives: Directives, request: httpx2.Request) -> httpx2.Response | _Reply | None:
    """The scripted failure of a first call, or ``None`` when this attempt succeeds."""
    kind = directives.fail
    if kind == "429":
        if request.headers.get("x-stainless-retry-count", "0") != "0":
            return None  # the SDK's retry: behave as if there were no fail directive
        return _error(429, "sim: scripted rate limit", "rate_limit_error", "rate_limit_exceeded", retry=True)
    if kind == "500":
        return _error(500, "sim: scripted server error", "server_error", "server_error", retry=True)
    if kind == "401":
        credential = str(request.headers.get("authorization")).partition(" ")[2]
        said = f"sim: scripted auth failure: Incorrect API key provided: {echoed(credential, directives.echo)}"
        return _error(401, said, "invalid_request_error", "invalid_api_key")
    if kind == "timeout":
        raise httpx2.ReadTimeout("sim timeout", request=request)
    if kind == "bad_args":
        return _Reply(tool_calls=[("calculator", BAD_ARGUMENTS)])
    if kind == "bad_json":
        return _Reply(content=BAD_JSON)
    return _Reply(tool_calls=[("teleport", json.dumps({"destination": "elsewhere"}))])


def _decide(chat: _Chat, directives: Directives) -> _Reply:
    """The reply when no failure applies:
    structured output > loop > spawn > call > delegate > write > arithmetic > answer > leaf
    (a spawning agent's children, given its directives but the spawn, make the call).
    Structured output offered with tools first makes the task's own tool call
    (``_acting``), as an agent asked to act and then answer JSON would."""
    if chat.output != "text":
        return _acting(chat, directives) or _Reply(content=json.dumps(_document(chat, directives)))
    if directives.loop:
        return _Reply(tool_calls=[("calculator", json.dumps({"expression": "1+1"}))])
    if directives.recall:
        return _finish(chat, chat.recalled())
    spawned = chat.results_of("spawn_agents") if directives.spawn else []
    if directives.spawn and ("spawn_agents" in chat.tool_names or spawned):
        results = spawned  # answered once no spawn tool is left, as when its agents are used up
        if len(results) < directives.rounds and "spawn_agents" in chat.tool_names:
            tasks = sim_directives.child_tasks(chat.task, spawn_round=len(results) + 1)
            agents = [{"task": t, "role": "worker"} for t in tasks]
            return _Reply(tool_calls=[("spawn_agents", json.dumps({"agents": agents}))])
        return _finish(chat, _count_leaves(results))
    if directives.call:
        return _called(chat, directives.call, directives.then, directives.parallel)
    if directives.delegate and "delegate" in chat.tool_names:
        results = chat.results_of("delegate")
        if not results:
            return _Reply(tool_calls=[("delegate", json.dumps({"task": directives.delegate, "role": "delegate"}))])
        return _finish(chat, _delegated(results[-1]))
    if directives.write and "write_file" in chat.tool_names:
        results = chat.results_of("write_file")
        if not results:
            return _Reply(
                tool_calls=[("write_file", json.dumps({"path": directives.write, "content": directives.plain}))]
            )
        return _finish(chat, results[-1])
    if directives.expression and "calculator" not in chat.tool_names:
        return _finish(chat, _text_answer(directives))
    if directives.expression:
        results = chat.results_of("calculator")
        if not results:
            return _Reply(tool_calls=[("calculator", json.dumps({"expression": directives.expression}))])
        return _finish(chat, results[-1])
    return _finish(chat, _plain_answer(directives))


def _acting(chat: _Chat, directives: Directives) -> _Reply | None:
    """The tool call a structured request offering tools makes before it answers:
    the ``[sim:call]`` or the arithmetic's ``calculator``, once; ``None`` when done."""
    if directives.call and directives.call.name in chat.tool_names and not chat.results_of(directives.call.name):
        return _Reply(tool_calls=[(directives.call.name, directives.call.arguments)])
    if directives.expression and "calculator" in chat.tool_names and not chat.results_of("calculator"):
        return _Reply(tool_calls=[("calculator", json.dumps({"expression": directives.expression}))])
    return None


def _called(chat: _Chat, call: Call, then: tuple[Call, ...] = (), times: int = 1) -> _Reply:
    """Call the tool a ``[sim:call]`` names (``times`` at once), then each ``[sim:then]``
    call in turn while this request offers its tool, then answer what the last said."""
    results = chat.results_of(call.name)
    if not results and call.name not in chat.tool_names:
        offered = ", ".join(sorted(n for n in chat.tool_names if n)) or "none"
        raise _BadRequest(f"[sim:call {call.name}]: tool {call.name!r} is not offered; offered: {offered}")
    if not results:
        return _Reply(tool_calls=[(call.name, call.arguments)] * times)
    last = results[-1]
    for step in then:
        done = chat.results_of(step.name)
        if done:
            last = done[-1]
        elif step.name in chat.tool_names:
            return _Reply(tool_calls=[(step.name, step.arguments)])
        else:  # the next call is another agent's to make (after a handoff): this one answers
            break
    return _finish(chat, last)


def _plain_answer(directives: Directives) -> str:
    """The answer of a task with nothing left to do: the answer directive's, else "done: ..."."""
    return directives.answer if directives.answer is not None else f"done: {directives.plain}"


def _text_answer(directives: Directives) -> str:
    """The answer given without tools: the arithmetic computed directly, else the plain one."""
    return str(directives.result) if directives.result is not None else _plain_answer(directives)


def _document(chat: _Chat, directives: Directives) -> Any:
    """The JSON a ``response_format`` asks for: an instance of its schema, or ``{"answer": ...}``."""
    text = _text_answer(directives)
    if chat.schema is None:
        return {"answer": text}
    fraction = round(int(_digest(chat.task), 16) / (16**12 - 1), 4)
    answers = structured.Answers(text, directives.result, fraction)
    script = SCRIPTS.get(chat.schema_name or "")
    if script is not None:
        return script(Prompt(chat.task, chat.last_user, directives, answers, chat.schema))
    return structured.instance(chat.schema, answers)


def _count_leaves(results: list[str]) -> str:
    """The spawning agent's answer from every round's ``spawn_agents`` result: the leaves
    its completed children report summed (one for a child that reports none), then why
    any child did not complete or a whole spawn was refused."""
    leaves, missing, refused = 0, [], []
    for result in results:
        summaries = _summaries(result)
        if summaries is None:
            refused.append(result.removeprefix("error:").strip())
            continue
        for summary in summaries:
            if summary.get("status") == "completed":
                found = _LEAVES.search(str(summary.get("output") or ""))
                leaves += int(found[1]) if found else 1
            else:
                missing.append(summary)
    notes = []
    if missing:
        notes.append(f"{len(missing)} not completed: {missing[0].get('error') or missing[0].get('status')}")
    if refused:
        notes.append(f"spawn failed: {refused[0]}")
    return f"leaves={leaves}" + (f" ({'; '.join(notes)})" if notes else "")


def _summaries(result: str) -> list[dict[str, Any]] | None:
    """A ``spawn_agents`` result's child summaries, or ``None`` when the spawn was refused."""
    try:
        summaries = json.loads(result)
    except ValueError:
        return None
    if not isinstance(summaries, list):
        return None
    return [s if isinstance(s, dict) else {"status": "invalid summary"} for s in summaries]


def _delegated(result: str) -> str:
    """The delegate's output, or why it has none."""
    try:
        summary = json.loads(result)
    except ValueError:
        return result
    if not isinstance(summary, dict):
        return result
    if summary.get("status") == "completed":
        return str(summary.get("output") or "")
    return f"delegate {summary.get('status')}: {summary.get('error')}"


def _finish(chat: _Chat, answer: str) -> _Reply:
    seen = chat.images_shown()
    if seen:
        answer = f"{answer} (saw {', '.join(seen)})"
    if "finish" in chat.tool_names:
        return _Reply(tool_calls=[("finish", json.dumps({"answer": answer}))])
    return _Reply(content=answer)


def _completion(chat: _Chat, reply: _Reply, directives: Directives, pace: _Pace) -> httpx2.Response:
    """A ``chat.completion`` body with the billing described in ``sim_directives``.

    A reply billed past the request's cap is billed as the cap, cut to what the cap buys
    of it (``_Reply.cut``) and ends with ``finish_reason="length"``. It never comes out
    whole: ``[sim:tokens N]`` pads content but not tool-call arguments, so when it bills
    calls past the cap with characters to spare, their last character is cut all the same.
    """
    tokens, bill = directives.tokens, directives.bill
    completion = tokens or sim_directives.text_tokens(reply.text, bill)
    if tokens and reply.content is not None:  # padded no further than past the cap, which cuts it
        reply = _Reply(content=reply.content.ljust(min(tokens, (chat.max_tokens or tokens) + 1) * 4))
    finish_reason = "tool_calls" if reply.tool_calls else "stop"
    if chat.max_tokens is not None and completion > chat.max_tokens and not directives.uncapped:
        completion, finish_reason = chat.max_tokens, "length"
        reply = reply.cut(min(sim_directives.chars_within(reply.text, chat.max_tokens, bill), len(reply.text) - 1))
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": _call_id(len(chat.messages), name if i == 0 else f"{name}:{i}"),  # unique in the reply
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
    prompt = sim_directives.prompt_tokens(chat.messages, chat.tools, bill)
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    head = {
        "id": "chatcmpl-sim-" + _digest(prompt_text(chat.messages, chat.tools) + json.dumps(message)),
        "object": "chat.completion",
        "created": CREATED,
        "model": chat.model,
    }
    if chat.stream:
        return _events(head, message, finish_reason, usage if chat.stream_usage else None, completion, pace)
    choice = {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
    return httpx2.Response(200, json={**head, "choices": [choice], "usage": usage})


def _events(
    head: dict[str, Any],
    message: dict[str, Any],
    finish_reason: str,
    usage: dict[str, int] | None,
    tokens: int,
    pace: _Pace,
) -> httpx2.Response:
    """The reply as a ``chat.completion.chunk`` stream: the content in ``tokens``
    pieces, each tool call whole in one chunk, the finish, then the usage if asked."""
    head = {**head, "object": "chat.completion.chunk"}
    content = message["content"] or ""
    pieces = max(1, min(tokens, len(content)))
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [
        {"content": content[i * len(content) // pieces : (i + 1) * len(content) // pieces]} for i in range(pieces)
    ]
    deltas += [{"tool_calls": [{"index": i, **call}]} for i, call in enumerate(message.get("tool_calls", []))]
    chunks = [{**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}]})
    if usage is not None:
        chunks.append({**head, "choices": [], "usage": usage})
    events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
    headers = {"content-type": "text/event-stream"}
    if not pace.seconds:
        return httpx2.Response(200, headers=headers, content="".join(events).encode())
    return httpx2.Response(200, headers=headers, content=pace.spread(events))


def _call_id(message_count: int, name: str) -> str:
    return "call_" + _digest(f"{message_count}:{name}")


def _digest(text: str) -> str:
    # surrogatepass: JSON may carry a lone surrogate (\ud800), which plain UTF-8 refuses.
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _text(content: Any) -> str:
    """Message content as text, whether a string or a list of content parts."""
    return parts.readable(content)


def _error(status: int, message: str, kind: str, code: str, *, retry: bool = False) -> httpx2.Response:
    """An OpenAI-style error; ``retry`` adds the short retry-after the SDK honours."""
    headers = {"retry-after-ms": RETRY_AFTER_MS, "retry-after": "1"} if retry else {}
    body = {"error": {"message": message, "type": kind, "code": code}}
    return httpx2.Response(status, headers=headers, json=body)
