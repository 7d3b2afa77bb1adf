"""Malformed or dishonest model replies end the agent with a status, never the worker.

The loop runs on a real Redis ledger; the endpoint is an ``httpx2.MockTransport``
handler behind the real OpenAI SDK, as a broken provider would answer. Whatever it
sends, the agent ends with a result, and the ledger charges what the call cost
(the worst case it was allowed when the reply does not say) with nothing left held.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import uuid

import httpx2
import pytest

from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentTerms
from covey.config.settings import Settings
from covey.context import RunContext
from covey.models.catalog import Catalog, ModelEntry
from covey.models.dialect import Dialects
from covey.models.llm import LLM
from covey.models.tokens import byte_tokens
from covey.spec import AgentSpec
from covey.status import AgentStatus, Cause, CauseKind
from covey.worker import loop
from covey.worker.deps import Deps

MODEL = "mock-model"  # served by the mock transport


@pytest.fixture
def deps(redis_server):
    return Deps.from_settings(Settings(redis_url=redis_server.url, model_retries=0))


def with_endpoint(deps: Deps, handler, stream: bool = False) -> Deps:
    """``deps`` whose model ``MODEL`` is answered by ``handler``, whole (the
    models file's ``stream = false``) or, with ``stream``, as a stream."""
    entry = ModelEntry(base_url="http://mock.test/v1", api_key_env="K", stream=stream)
    catalog = Catalog({MODEL: entry}, deps.settings, {"K": "k"})
    llm = LLM(deps.settings, catalog, transport=httpx2.MockTransport(handler), dialects=Dialects())
    return dataclasses.replace(deps, llm=llm)


def run(deps: Deps, task: str, model: str = MODEL, **fields):
    ctx = RunContext(job_id=f"bad-{uuid.uuid4().hex}", agent_id="root", budget=Budget(max_tokens=1_000_000))
    spec = AgentSpec(task=task, model=model, **fields)
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(max_cycles=spec.max_cycles))
    state, action = loop.begin(deps, ctx, spec)
    out = loop.advance(deps, state, action)
    assert isinstance(out, loop.Finished)
    snap = deps.ledger.snapshot(ctx.job_id)
    assert snap.tokens_reserved == 0, "a hold outlived its call"
    assert snap.tokens_used == out.result.usage.total_tokens, "the ledger and the result disagree"
    return out.result


def completion(message=None, usage=True, finish_reason="stop", **body):
    """A chat.completion body; ``usage=True`` reports 10 prompt and 5 completion tokens."""
    body = {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": MODEL,
        "choices": [
            {"index": 0, "message": message or {"role": "assistant", "content": "fine"}, "finish_reason": finish_reason}
        ],
        **body,
    }
    if usage is True:
        body["usage"] = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    elif usage is not None:
        body["usage"] = usage
    return body


def replying(*bodies):
    """A handler answering each call with the next body (the last one from then on)."""
    calls = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        calls.append(json.loads(request.read()))
        body = bodies[min(len(calls), len(bodies)) - 1]
        if isinstance(body, bytes):
            return httpx2.Response(200, content=body, headers={"content-type": "application/json"})
        return httpx2.Response(200, json=body)

    handle.calls = calls
    return handle


def bad_args_call(args: str):
    call = {"id": "call_1", "type": "function", "function": {"name": "calculator", "arguments": args}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def test_invalid_json_tool_arguments_fail_the_agent_naming_the_tool(deps):
    result = run(
        with_endpoint(deps, replying(completion(bad_args_call('{"expression": "1+'), finish_reason="tool_calls"))),
        "add",
    )
    assert result.status is AgentStatus.FAILED
    assert result.error.startswith("model sent malformed arguments for tool 'calculator'")
    assert result.cause == Cause(kind=CauseKind.MALFORMED_REPLY)
    assert result.usage.total_tokens == 15


@pytest.mark.parametrize(
    "body, error",
    [
        (completion(choices=[]), "model returned a malformed reply: no choices"),
        ({k: v for k, v in completion().items() if k != "choices"}, "model returned a malformed reply: no choices"),
        (
            completion(choices=[{"index": 0, "message": None, "finish_reason": "stop"}]),
            "model returned a malformed reply",
        ),
        (completion({"role": "assistant", "content": 42}), "model returned a malformed reply: content is a int"),
        (
            completion({"role": "assistant", "content": None, "tool_calls": "calculator"}),
            "model returned a malformed reply: tool_calls is a str",
        ),
        (
            completion(bad_args_call({"expression": "1+1"})),
            "model returned a malformed reply: tool call arguments is a dict, not text",
        ),
        ([1, 2, 3], "model returned a malformed reply"),
    ],
)
def test_a_reply_of_the_wrong_shape_fails_the_agent_and_is_charged(deps, body, error):
    result = run(with_endpoint(deps, replying(body)), "hello")
    assert result.status is AgentStatus.FAILED
    assert result.error.startswith(error)
    assert result.cause == Cause(kind=CauseKind.MALFORMED_REPLY)
    # the endpoint answered: what it reported is charged (the worst case when it reported nothing usable)
    assert result.usage.cycles == 1 and result.usage.total_tokens > 0


def test_a_body_that_is_not_json_is_charged_as_the_worst_case(deps):
    result = run(with_endpoint(deps, replying(b"<html>gateway error</html>")), "hello")
    assert result.status is AgentStatus.FAILED
    assert result.error.startswith("model returned a malformed reply: Expecting value")
    assert result.usage.completion_tokens == AgentSpec(task="x").max_call_tokens


def test_a_reply_without_usage_is_charged_the_worst_case_and_answers(deps):
    result = run(with_endpoint(deps, replying(completion(usage=None))), "hello", tools=[])
    assert result.status is AgentStatus.COMPLETED and result.output == "fine"
    assert result.usage.completion_tokens == AgentSpec(task="x").max_call_tokens


@pytest.mark.parametrize(
    "usage, shown",
    [
        ({"prompt_tokens": -5, "completion_tokens": 2}, "prompt_tokens=-5"),
        ({"prompt_tokens": 3, "completion_tokens": "many"}, "completion_tokens='many'"),
        ({"prompt_tokens": 1e40, "completion_tokens": 2}, "prompt_tokens=1e+40"),
        ({"prompt_tokens": True, "completion_tokens": 2}, "prompt_tokens=True"),
        ({"prompt_tokens": None, "completion_tokens": None}, "prompt_tokens=None"),
    ],
)
def test_usage_no_ledger_could_hold_fails_the_agent_charged_the_worst_case(deps, usage, shown):
    result = run(with_endpoint(deps, replying(completion(usage=usage))), "hello", tools=[])
    assert result.status is AgentStatus.FAILED
    assert result.error == f"model reported unusable usage: {shown}"
    assert result.cause == Cause(kind=CauseKind.MALFORMED_REPLY)
    assert result.usage.completion_tokens == AgentSpec(task="x").max_call_tokens


def test_an_enormous_answer_over_its_cap_stops_the_agent_and_is_charged_in_full(deps):
    answer = "ж" * 5_000_000  # 10 MB of UTF-8, from an endpoint that ignores max_completion_tokens
    usage = {"prompt_tokens": 10, "completion_tokens": byte_tokens(answer)}
    result = run(
        with_endpoint(deps, replying(completion({"role": "assistant", "content": answer}, usage=usage))),
        "hello",
        tools=[],
    )
    assert result.status is AgentStatus.FAILED
    assert result.error == (
        f"the provider reported {byte_tokens(answer)} completion tokens, {byte_tokens(answer) - 4096} over the "
        f"4096 reserved for them; all {byte_tokens(answer) + 10} tokens are charged"
    )
    assert result.output is None and result.usage.total_tokens == byte_tokens(answer) + 10


def test_an_enormous_answer_without_usage_ends_with_a_status(deps):
    answer = "x" * 10_000_000
    result = run(
        with_endpoint(deps, replying(completion({"role": "assistant", "content": answer}, usage=None))),
        "hello",
        tools=[],
    )
    assert result.status is AgentStatus.COMPLETED and len(result.output) == len(answer)


def test_over_reported_prompt_tokens_stop_the_agent(deps):
    handler = replying(completion(usage={"prompt_tokens": 1_000_000, "completion_tokens": 1}))
    result = run(with_endpoint(deps, handler), "hello", tools=[])
    assert result.status is AgentStatus.FAILED
    assert result.error.startswith("the provider reported 1000000 prompt tokens, ")
    assert result.cause == Cause(kind=CauseKind.MODEL_ERROR)
    assert "reserved for them; all 1000001 tokens are charged" in result.error
    assert len(handler.calls) == 1


# --- the sim's billing modes: the reservation holds for dense text ----------------


def test_cjk_billed_a_token_per_byte_stays_within_its_reservations(deps):
    text = "請計算並解釋：" * 200 + " What is 6 * 7?"
    result = run(deps, f"[sim:bill bytes] {text}", model="sim")
    assert result.status is AgentStatus.COMPLETED and result.output == "42"
    assert result.usage.cycles == 2
    assert result.usage.prompt_tokens > 2 * byte_tokens(text)  # billed per byte, both calls


def test_a_sim_over_reporting_its_usage_stops_the_agent_with_the_recorded_error(deps):
    result = run(deps, "[sim:bill over] What is 6 * 7?", model="sim")
    assert result.status is AgentStatus.FAILED
    assert result.error.startswith("the provider reported ")
    assert " prompt tokens, " in result.error and "reserved for them; all " in result.error
    assert result.usage.cycles == 1 and result.output is None


# --- streamed replies: a server that ignores its cap is cut at it ------------------


def streaming(chunks, calls=None):
    """A handler streaming ``chunks`` (an iterable of chunk objects) as server-sent
    events, keeping each request's body in ``calls``."""

    def handle(request: httpx2.Request) -> httpx2.Response:
        if calls is not None:
            calls.append(json.loads(request.read()))
        events = (f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=events)

    return handle


def piece(text, finish=None):
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}


def test_a_stream_past_its_cap_is_cut_at_the_reservation_and_read_no_further(deps):
    sent = itertools.count()
    endless = (piece("word ") for _ in sent)  # a server that reads neither name of the cap
    calls = []
    result = run(with_endpoint(deps, streaming(endless, calls), stream=True), "hello", tools=[], max_call_tokens=300)
    assert (calls[0]["max_tokens"], calls[0]["max_completion_tokens"], calls[0]["stream"]) == (300, 300, True)
    assert result.status is AgentStatus.FAILED and result.cause == Cause(kind=CauseKind.REPLY_CUT)
    assert result.usage.completion_tokens == 300  # the reservation: no more, and no less than it generated
    assert next(sent) < 400  # it stopped reading where the reply passed the cap


def test_a_stream_without_usage_is_charged_what_covey_counted(deps):
    chunks = [piece("a"), piece("b"), piece("c", finish="stop")]
    result = run(with_endpoint(deps, streaming(chunks), stream=True), "hello", tools=[])
    assert result.status is AgentStatus.COMPLETED and result.output == "abc"
    assert result.usage.completion_tokens == 3


def test_a_streams_reported_usage_over_its_reservation_stops_the_agent(deps):
    usage = {"choices": [], "usage": {"prompt_tokens": 1_000_000, "completion_tokens": 1}}
    result = run(with_endpoint(deps, streaming([piece("a", finish="stop"), usage]), stream=True), "hello", tools=[])
    assert result.status is AgentStatus.FAILED
    assert result.error.startswith("the provider reported 1000000 prompt tokens, ")


def test_an_empty_stream_is_asked_again_whole_and_charged_for_what_that_answers(deps):
    calls = []
    result = run(with_endpoint(deps, streaming([{"choices": []}], calls), stream=True), "hello", tools=[])
    assert [call.get("stream", False) for call in calls] == [True, False]  # as a server that cannot stream tools
    assert result.status is AgentStatus.FAILED
    assert result.error.startswith("model returned a malformed reply: Expecting value")  # events are no JSON body
    assert result.usage.completion_tokens == AgentSpec(task="x").max_call_tokens


@pytest.mark.parametrize(
    "chunks, error",
    [
        ([piece(42)], "model returned a malformed reply: content is a int, not text"),
        (["not an object"], "model returned a malformed reply: a stream chunk is a str"),
    ],
)
def test_a_stream_of_the_wrong_shape_fails_the_agent_charged_the_reservation(deps, chunks, error):
    result = run(with_endpoint(deps, streaming(chunks), stream=True), "hello", tools=[])
    assert result.status is AgentStatus.FAILED and result.error.startswith(error)
    assert result.usage.completion_tokens == AgentSpec(task="x").max_call_tokens


def broken_off(chunks, error):
    def events():
        for chunk in chunks:
            yield f"data: {json.dumps(chunk)}\n\n".encode()
        raise error

    return lambda request: httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=events())


@pytest.mark.parametrize(
    "error, said",
    [
        (httpx2.ReadTimeout("stalled"), "model call timed out after "),
        (httpx2.RemoteProtocolError("peer closed connection"), "model reply broke off mid-stream: "),
    ],
)
def test_a_stream_that_stops_answering_is_charged_its_reservation(deps, error, said):
    result = run(with_endpoint(deps, broken_off([piece("a")], error), stream=True), "hello", tools=[])
    assert result.status is AgentStatus.FAILED and result.error.startswith(said)
    assert result.error.endswith("; charged the reservation: no usage came back")
    assert result.usage.completion_tokens == AgentSpec(task="x").max_call_tokens


def test_an_unanswered_call_is_asked_again_reserved_anew_each_time(redis_server):
    deps = Deps.from_settings(Settings(redis_url=redis_server.url, model_retries=2))
    calls = []

    def stalled(request: httpx2.Request) -> httpx2.Response:
        calls.append(request)
        raise httpx2.ReadTimeout("stalled", request=request)

    result = run(with_endpoint(deps, stalled), "hello", tools=[])
    assert len(calls) == 3  # asked twice again, by covey, not the SDK
    assert result.status is AgentStatus.FAILED and result.cause.retries == 2
    assert result.usage.cycles == 3 and result.usage.completion_tokens == 3 * AgentSpec(task="x").max_call_tokens


def test_asking_again_stops_where_the_budget_cannot_reserve_another_attempt(redis_server):
    deps = Deps.from_settings(Settings(redis_url=redis_server.url, model_retries=5))
    stalled = broken_off([], httpx2.ReadTimeout("stalled"))
    ctx = RunContext(job_id=f"bad-{uuid.uuid4().hex}", agent_id="root", budget=Budget(max_tokens=12_000))
    spec = AgentSpec(task="hello", model=MODEL, tools=[], max_call_tokens=2_000)
    deps = with_endpoint(deps, stalled, stream=True)
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(max_cycles=spec.max_cycles))
    state, action = loop.begin(deps, ctx, spec)
    out = loop.advance(deps, state, action)
    assert out.result.status is AgentStatus.FAILED
    assert "no usage came back; not asked again: " in out.result.error
    snap = deps.ledger.snapshot(ctx.job_id)
    assert snap.tokens_reserved == 0 and snap.tokens_used <= 12_000 and out.result.usage.cycles == 2


def test_a_whole_reply_that_stalls_mid_body_is_charged_and_asked_again_by_covey_alone(redis_server):
    deps = Deps.from_settings(Settings(redis_url=redis_server.url, model_retries=1))
    calls = []
    stalls = broken_off([], httpx2.ReadTimeout("stalled"))

    def counted(request: httpx2.Request) -> httpx2.Response:
        calls.append(request)
        return stalls(request)

    result = run(with_endpoint(deps, counted), "hello", tools=[])
    assert len(calls) == 2  # once, then once again as a new call: never resent by the SDK as well
    assert result.error.endswith("; charged the reservation: no usage came back")
    assert result.usage.cycles == 2 and result.usage.completion_tokens == 2 * AgentSpec(task="x").max_call_tokens
