"""The sim model through the real OpenAI SDK on an in-process transport."""

from __future__ import annotations

import json
import math

import httpx2
import openai
import pytest

from covey.models.sim import directives as sim_directives
from covey.models.sim.handler import _Reply, make_handler, transport
from covey.models.tokens import prompt_text
from covey.parts import data_url
from covey.tools.registry import schema
from tests.images import png

TOOLS = [schema(n) for n in ("spawn_agents", "finish", "calculator")]


class Recorder:
    """A handler wrapper that remembers every request the SDK sent."""

    def __init__(self, handler):
        self.handler, self.requests = handler, []

    def __call__(self, request):
        self.requests.append(request)
        return self.handler(request)


def client(max_retries=0, handler=None):
    http = httpx2.Client(transport=httpx2.MockTransport(handler) if handler else transport())
    return openai.OpenAI(api_key="sim", base_url="http://sim.covey/v1", http_client=http, max_retries=max_retries)


def ask(task, tools=None, history=(), max_retries=0, handler=None, **kwargs):
    messages = [{"role": "user", "content": task}, *history]
    extra = {"tools": tools} if tools else {}
    return client(max_retries, handler).chat.completions.create(model="sim", messages=messages, **extra, **kwargs)


def call_of(response):
    (call,) = response.choices[0].message.tool_calls
    return call.function.name, call.function.arguments


def answered(response, content, name=None):
    """The conversation after ``response`` plus a tool message answering its one call."""
    call = response.choices[0].message.tool_calls[0]
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call.id, "type": "function", "function": call.function.model_dump()}],
    }
    return [assistant, {"role": "tool", "tool_call_id": call.id, "content": content}]


# --- plain replies and accounting ------------------------------------------------


def test_leaf_without_tools_answers_in_content_with_exact_usage():
    response = ask("  Say hello [sim:latency 0] ")
    choice = response.choices[0]
    assert choice.message.content == "done: Say hello"
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    messages = [{"role": "user", "content": "  Say hello [sim:latency 0] "}]
    prompt = math.ceil(len(json.dumps({"messages": messages, "tools": []}, separators=(",", ":"))) / 4)
    assert response.usage.prompt_tokens == prompt
    assert response.usage.completion_tokens == math.ceil(len("done: Say hello") / 4)
    assert response.usage.total_tokens == prompt + response.usage.completion_tokens
    assert response.model == "sim"


def test_prompt_tokens_are_billed_on_prompt_text_with_tools():
    messages = [{"role": "user", "content": "Say hello"}]
    response = ask("Say hello", tools=TOOLS)
    text = prompt_text(messages, TOOLS)
    assert text == json.dumps({"messages": messages, "tools": TOOLS}, separators=(",", ":"))
    assert response.usage.prompt_tokens == math.ceil(len(text) / 4)
    assert sim_directives.prompt_tokens(messages, TOOLS) == response.usage.prompt_tokens


def test_finish_tool_is_used_when_offered_and_replies_are_deterministic():
    first, second = ask("Say hello", tools=TOOLS), ask("Say hello", tools=TOOLS)
    assert call_of(first) == ("finish", json.dumps({"answer": "done: Say hello"}))
    assert first.choices[0].finish_reason == "tool_calls"
    assert first.choices[0].message.tool_calls[0].id.startswith("call_")
    assert first.model_dump() == second.model_dump()
    assert first.usage.completion_tokens == math.ceil(len(json.dumps({"answer": "done: Say hello"})) / 4)


def test_answer_directive_runs_to_the_closing_bracket():
    response = ask("Report [sim:answer the sky is blue, mostly] please", tools=TOOLS)
    assert call_of(response) == ("finish", json.dumps({"answer": "the sky is blue, mostly"}))


def test_arithmetic_calls_the_calculator_then_answers_its_result():
    first = ask("Quick: What is 6 * 7? thanks", tools=TOOLS)
    assert call_of(first) == ("calculator", json.dumps({"expression": "6 * 7"}))
    done = ask("Quick: What is 6 * 7? thanks", tools=TOOLS, history=answered(first, "42"))
    assert call_of(done) == ("finish", json.dumps({"answer": "42"}))


def test_arithmetic_outranks_answer_directive():
    response = ask("What is 1.5+2? [sim:answer nope]", tools=TOOLS)
    assert call_of(response) == ("calculator", json.dumps({"expression": "1.5 + 2"}))


def test_loop_never_finishes():
    task = "What is 1 + 2? [sim:loop]"
    first = ask(task, tools=TOOLS)
    assert call_of(first) == ("calculator", json.dumps({"expression": "1+1"}))
    later = ask(task, tools=TOOLS, history=answered(first, "2"))
    assert call_of(later) == ("calculator", json.dumps({"expression": "1+1"}))
    assert later.choices[0].message.tool_calls[0].id != first.choices[0].message.tool_calls[0].id


# --- tokens and max_tokens -----------------------------------------------------------


def test_tokens_directive_pads_content_to_exactly_n_tokens():
    response = ask("Hi [sim:tokens 10]")
    assert response.choices[0].message.content == "done: Hi".ljust(40)
    assert response.usage.completion_tokens == 10


def test_tokens_directive_reports_n_for_tool_calls():
    response = ask("Hi [sim:tokens 50]", tools=TOOLS)
    assert call_of(response) == ("finish", json.dumps({"answer": "done: Hi"}))
    assert response.usage.completion_tokens == 50


def test_max_tokens_cuts_a_tool_call_inside_its_arguments():
    response = ask("[sim:answer " + "x" * 100 + "]", tools=TOOLS, max_tokens=5)
    choice = response.choices[0]
    assert choice.finish_reason == "length"
    assert choice.message.content is None
    assert call_of(response) == ("finish", json.dumps({"answer": "x" * 100})[:20])
    with pytest.raises(json.JSONDecodeError):
        json.loads(call_of(response)[1])
    assert response.usage.completion_tokens == 5


def test_tokens_directive_over_max_tokens_cuts_tool_call_arguments_at_four_chars_a_token():
    response = ask("Hi [sim:tokens 50]", tools=TOOLS, max_tokens=3)
    assert response.choices[0].finish_reason == "length"
    assert call_of(response) == ("finish", '{"answer": "')
    assert response.usage.completion_tokens == 3


def test_tool_call_billed_past_max_tokens_never_comes_out_whole():
    whole = json.dumps({"answer": "done: Hi"})  # 22 characters, within the 40 of 10 tokens
    response = ask("Hi [sim:tokens 50]", tools=TOOLS, max_tokens=10)
    assert response.choices[0].finish_reason == "length"
    assert call_of(response) == ("finish", whole[:-1])
    assert response.usage.completion_tokens == 10


def test_a_cut_keeps_whole_calls_in_order_then_the_one_being_generated():
    reply = _Reply(tool_calls=[("a", '{"x": 1}'), ("b", '{"y": 22}'), ("c", "{}")])
    assert reply.cut(11).tool_calls == [("a", '{"x": 1}'), ("b", '{"y')]
    assert reply.cut(8).tool_calls == [("a", '{"x": 1}'), ("b", "")]
    assert reply.cut(3).tool_calls == [("a", '{"x')]


def test_max_tokens_cuts_padded_content():
    response = ask("Hi [sim:tokens 10]", max_tokens=3)
    assert response.choices[0].finish_reason == "length"
    assert response.choices[0].message.content == "done: Hi    "
    assert response.usage.completion_tokens == 3


def test_max_completion_tokens_caps_a_long_content_answer():
    response = ask("[sim:answer " + "x" * 100 + "]", max_completion_tokens=5)
    assert response.choices[0].finish_reason == "length"
    assert response.choices[0].message.content == "x" * 20
    assert response.usage.completion_tokens == 5


@pytest.mark.parametrize("cap", [6, 100])  # the finish call is 22 characters: 6 tokens
def test_a_reply_within_max_tokens_is_untouched(cap):
    response = ask("Hi", tools=TOOLS, max_tokens=cap)
    assert response.choices[0].finish_reason == "tool_calls"
    assert call_of(response) == ("finish", json.dumps({"answer": "done: Hi"}))
    assert response.usage.completion_tokens == 6
    assert ask("Hi", max_completion_tokens=cap).choices[0].finish_reason == "stop"


# --- spawning --------------------------------------------------------------------------


def test_spawn_asks_for_width_children_one_level_shallower():
    response = ask("Survey [sim:spawn width=3 depth=2] [sim:tokens 9]", tools=TOOLS)
    name, arguments = call_of(response)
    assert name == "spawn_agents"
    agents = json.loads(arguments)["agents"]
    assert agents == [
        {"task": f"Survey [sim:spawn width=3 depth=1] [sim:tokens 9] (part {i} of 3)", "role": "worker"}
        for i in (1, 2, 3)
    ]


def test_spawn_at_depth_one_gives_children_no_spawn_directive():
    response = ask("Survey [sim:spawn width=2 depth=1] now", tools=TOOLS)
    tasks = [a["task"] for a in json.loads(call_of(response)[1])["agents"]]
    assert tasks == ["Survey now (part 1 of 2)", "Survey now (part 2 of 2)"]
    leaf = ask(tasks[0], tools=TOOLS)
    assert call_of(leaf) == ("finish", json.dumps({"answer": "done: Survey now (part 1 of 2)"}))


def summary(status, output=None, error=None):
    return {"agent_id": "a", "role": "worker", "status": status, "output": output, "error": error}


def test_spawn_sums_leaves_of_completed_children():
    task = "Survey [sim:spawn width=3 depth=2]"
    first = ask(task, tools=TOOLS)
    results = [summary("completed", "leaves=3"), summary("completed", "done: x"), summary("completed", "leaves=2")]
    done = ask(task, tools=TOOLS, history=answered(first, json.dumps(results)))
    assert call_of(done) == ("finish", json.dumps({"answer": "leaves=6"}))


def test_spawn_reports_why_children_did_not_complete():
    task = "Survey [sim:spawn width=3 depth=1]"
    first = ask(task, tools=TOOLS)
    results = [
        summary("completed", "done: x"),
        summary("failed", error="depth cap reached"),
        summary("cancelled"),
    ]
    done = ask(task, tools=TOOLS, history=answered(first, json.dumps(results)))
    answer = json.loads(call_of(done)[1])["answer"]
    assert answer == "leaves=1 (2 not completed: depth cap reached)"


def test_spawn_refused_as_a_whole():
    task = "Survey [sim:spawn width=3 depth=1]"
    first = ask(task, tools=TOOLS)
    done = ask(task, tools=TOOLS, history=answered(first, "error: agent budget exhausted"))
    assert json.loads(call_of(done)[1])["answer"] == "leaves=0 (spawn failed: agent budget exhausted)"


def spawned(task, *results):
    """The reply after each of ``results`` answered the previous reply's spawn, in turn."""
    history, response = [], ask(task, tools=TOOLS)
    for result in results:
        assert call_of(response)[0] == "spawn_agents"
        history += answered(response, json.dumps(result) if isinstance(result, list) else result)
        response = ask(task, tools=TOOLS, history=history)
    return response


def test_rounds_spawn_a_wave_again_until_each_round_has_a_result():
    task = "Survey [sim:spawn width=2 depth=1] [sim:rounds 3] now"
    wave = [summary("completed", "done: x")] * 2
    first, second, third = spawned(task), spawned(task, wave), spawned(task, wave, wave)
    assert [a["task"] for a in json.loads(call_of(first)[1])["agents"]] == [
        "Survey now (part 1 of 2)",
        "Survey now (part 2 of 2)",
    ]
    assert [a["task"] for a in json.loads(call_of(third)[1])["agents"]] == [
        "Survey now (round 3) (part 1 of 2)",
        "Survey now (round 3) (part 2 of 2)",
    ]
    assert call_of(first)[0] == call_of(second)[0] == call_of(third)[0] == "spawn_agents"
    assert len({r.choices[0].message.tool_calls[0].id for r in (first, second, third)}) == 3
    assert call_of(spawned(task, wave, wave, wave)) == ("finish", json.dumps({"answer": "leaves=6"}))


def test_rounds_answer_the_leaves_of_every_round():
    task = "Survey [sim:spawn width=2 depth=2] [sim:rounds 3]"
    rounds = [
        [summary("completed", "leaves=3"), summary("completed", "done: x")],
        [summary("completed", "leaves=2"), summary("failed", error="depth cap reached")],
        [summary("cancelled"), summary("completed", "leaves=4")],
    ]
    done = spawned(task, *rounds)
    assert call_of(done) == ("finish", json.dumps({"answer": "leaves=10 (2 not completed: depth cap reached)"}))


def test_rounds_count_on_past_a_refused_spawn():
    task = "Survey [sim:spawn width=1 depth=1] [sim:rounds 2]"
    done = spawned(task, "error: agent budget exhausted", [summary("completed", "done: x")])
    assert json.loads(call_of(done)[1])["answer"] == "leaves=1 (spawn failed: agent budget exhausted)"


def test_children_of_a_deeper_spawn_drop_the_rounds_directive():
    tasks = sim_directives.child_tasks("Survey [sim:rounds 2] [sim:spawn width=2 depth=2] now")
    assert tasks == [f"Survey [sim:spawn width=2 depth=1] now (part {i} of 2)" for i in (1, 2)]
    assert sim_directives.parse(tasks[0]).rounds == 1


def test_spawn_without_spawn_tool_behaves_as_a_leaf():
    response = ask("Survey [sim:spawn width=3 depth=1]", tools=[schema("finish")])
    assert call_of(response) == ("finish", json.dumps({"answer": "done: Survey"}))


# --- scripted failures ----------------------------------------------------------------


def test_429_fails_once_then_the_sdk_retry_succeeds():
    recorder = Recorder(make_handler())
    response = ask("Hi [sim:fail 429]", tools=TOOLS, max_retries=2, handler=recorder)
    assert call_of(response) == ("finish", json.dumps({"answer": "done: Hi"}))
    assert [r.headers["x-stainless-retry-count"] for r in recorder.requests] == ["0", "1"]


def test_429_without_retries_is_a_rate_limit_error():
    with pytest.raises(openai.RateLimitError) as caught:
        ask("Hi [sim:fail 429]", tools=TOOLS)
    assert caught.value.response.headers["retry-after-ms"] == "20"
    assert caught.value.response.headers["retry-after"] == "1"
    assert caught.value.body["type"] == "rate_limit_error"


def test_500_fails_every_attempt_of_the_first_call():
    recorder = Recorder(make_handler())
    with pytest.raises(openai.InternalServerError) as caught:
        ask("Hi [sim:fail 500]", tools=TOOLS, max_retries=2, handler=recorder)
    assert len(recorder.requests) == 3
    assert caught.value.body["type"] == "server_error"


def test_timeout_fails_the_first_call():
    with pytest.raises(openai.APITimeoutError):
        ask("Hi [sim:fail timeout]", tools=TOOLS)


def test_timeout_raises_on_retries_too():
    handler = make_handler()
    body = json.dumps({"model": "sim", "messages": [{"role": "user", "content": "[sim:fail timeout]"}]})
    request = httpx2.Request(
        "POST", "http://sim.covey/v1/chat/completions", headers={"x-stainless-retry-count": "3"}, content=body
    )
    with pytest.raises(httpx2.ReadTimeout):
        handler(request)


def test_bad_args_replies_with_unparseable_calculator_arguments():
    name, arguments = call_of(ask("Hi [sim:fail bad_args]", tools=TOOLS))
    assert name == "calculator"
    with pytest.raises(json.JSONDecodeError):
        json.loads(arguments)


def test_unknown_tool_calls_a_tool_never_offered():
    name, _ = call_of(ask("Hi [sim:fail unknown_tool]", tools=TOOLS))
    assert name == "teleport"
    assert name not in {t["function"]["name"] for t in TOOLS}


@pytest.mark.parametrize("kind", ["500", "timeout", "bad_args", "unknown_tool"])
def test_fail_directives_do_nothing_after_the_first_call(kind):
    task = f"Hi [sim:fail {kind}]"
    first = ask("Hi", tools=TOOLS)  # any earlier assistant turn makes this a later call
    later = ask(task, tools=TOOLS, history=answered(first, "ok"))
    assert call_of(later) == ("finish", json.dumps({"answer": "done: Hi"}))


# --- latency, routes and bad requests ---------------------------------------------------


def test_latency_adds_directive_to_handler_default():
    slept = []
    handler = make_handler(latency_ms=5, sleep=slept.append)
    ask("Hi [sim:latency 30]", handler=handler)
    ask("Hi", handler=handler)
    assert slept == [pytest.approx(0.035), pytest.approx(0.005)]


def test_a_streamed_reply_takes_half_its_latency_to_start_and_spreads_the_rest_between_its_chunks():
    slept = []
    handler = make_handler(latency_ms=100, sleep=slept.append)
    chunks = list(
        client(handler=handler).chat.completions.create(
            model="sim", messages=[{"role": "user", "content": "Say hello"}], stream=True
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "done: Say hello"
    assert slept[0] == pytest.approx(0.05)  # before the first chunk
    assert len(slept) > 3 and sum(slept[1:]) == pytest.approx(0.05)  # one pause before each chunk


def test_other_routes_are_openai_style_404s():
    with pytest.raises(openai.NotFoundError) as caught:
        client().models.list()
    assert set(caught.value.body) == {"message", "type", "code"}
    assert "GET /v1/models" in caught.value.body["message"]


@pytest.mark.parametrize(
    "task, named",
    [
        ("[sim:fail sometimes]", "expected a kind"),
        ("[sim:spawn width=2]", "width=W"),
        ("[sim:jump]", "jump"),
        ("Survey [sim:rounds 2]", "[sim:rounds 2]: needs a [sim:spawn"),
        ("[sim:spawn width=1 depth=1] [sim:rounds 0]", "positive whole number"),
    ],
)
def test_malformed_directives_are_a_400_naming_the_problem(task, named):
    with pytest.raises(openai.BadRequestError) as caught:
        ask(task)
    assert named in caught.value.body["message"]


def test_a_fail_with_part_hits_only_that_sibling():
    assert sim_directives.parse("x [sim:fail 500 part=2] (part 2 of 3)").fail == "500"
    assert sim_directives.parse("x [sim:fail 500 part=2] (part 1 of 3)").fail is None
    assert sim_directives.parse("x [sim:fail 500 part=2]").fail is None
    name, _ = call_of(ask("Hi [sim:fail bad_args part=1] (part 1 of 2)", tools=TOOLS))
    assert name == "calculator"


def test_write_directive_writes_the_plain_task_then_answers_the_tool_result():
    tools = [schema(n) for n in ("write_file", "finish")]
    first = ask("keep this [sim:write notes/a.md]", tools=tools)
    name, arguments = call_of(first)
    assert name == "write_file"
    assert json.loads(arguments) == {"path": "notes/a.md", "content": "keep this"}
    done = ask("keep this [sim:write notes/a.md]", tools=tools, history=answered(first, "wrote notes/a.md"))
    assert json.loads(call_of(done)[1])["answer"] == "wrote notes/a.md"


def test_delegate_directive_hands_the_task_to_one_child_and_answers_its_output():
    tools = [schema(n) for n in ("delegate", "finish", "calculator")]
    task = "check [sim:delegate What is 6 * 7?]"
    first = ask(task, tools=tools)
    name, arguments = call_of(first)
    assert (name, json.loads(arguments)["task"]) == ("delegate", "What is 6 * 7?")
    summary = {"agent_id": "a", "role": "delegate", "status": "completed", "output": "42", "error": None}
    done = ask(task, tools=tools, history=answered(first, json.dumps(summary)))
    assert json.loads(call_of(done)[1])["answer"] == "42"
    failed = {**summary, "status": "budget_exceeded", "output": None, "error": "agent cap"}
    done = ask(task, tools=tools, history=answered(first, json.dumps(failed)))
    assert json.loads(call_of(done)[1])["answer"] == "delegate budget_exceeded: agent cap"


def test_call_directive_calls_the_named_tool_then_answers_what_it_said():
    weather = {
        "type": "function",
        "function": {"name": "lookup_weather", "description": "", "parameters": {"type": "object"}},
    }
    tools = [weather, schema("finish")]
    task = 'Weather? [sim:call lookup_weather {"city": "Paris"}]'
    first = ask(task, tools=tools)
    name, arguments = call_of(first)
    assert (name, json.loads(arguments)) == ("lookup_weather", {"city": "Paris"})
    done = ask(task, tools=tools, history=answered(first, "cloudy"))
    assert json.loads(call_of(done)[1])["answer"] == "cloudy"
    assert call_of(ask("[sim:call finish]", tools=tools)) == ("finish", "{}")  # no arguments: {}


def test_then_directives_make_their_calls_in_turn_each_by_the_agent_offered_its_tool():
    """A triage agent looks up, then hands off; the agent it handed off to, offered
    neither of those tools, makes the last call and answers what it said."""

    def tool(name):
        return {"type": "function", "function": {"name": name, "description": "", "parameters": {"type": "object"}}}

    task = '[sim:call lookup {"id": 1}] [sim:then transfer {}] [sim:then refund {"id": 1}]'
    triage = [tool("lookup"), tool("transfer")]
    first = ask(task, tools=triage)
    assert call_of(first) == ("lookup", '{"id": 1}')
    history = answered(first, "shipped")
    second = ask(task, tools=triage, history=history)
    assert call_of(second) == ("transfer", "{}")
    history = [*history, *answered(second, "to billing")[-2:]]
    third = ask(task, tools=[tool("refund")], history=history)
    assert call_of(third) == ("refund", '{"id": 1}')
    done = ask(task, tools=[tool("refund")], history=[*history, *answered(third, "refunded")[-2:]])
    assert done.choices[0].message.content == "refunded"
    with pytest.raises(openai.BadRequestError, match="needs a"):
        ask("[sim:then refund {}]", tools=[tool("refund")])


@pytest.mark.parametrize(
    "task, named",
    [
        ('[sim:call lookup_weather {"city": "Paris"}]', "tool 'lookup_weather' is not offered; offered: calculator"),
        ("[sim:call lookup_weather [1]]", "[sim:call lookup_weather [1]"),
        ("[sim:call lookup_weather {nope}]", "the arguments are not JSON"),
        ("[sim:call]", "expected a tool name"),
    ],
)
def test_a_call_of_a_tool_not_offered_or_malformed_is_a_400_naming_it(task, named):
    with pytest.raises(openai.BadRequestError) as caught:
        ask(task, tools=[schema("calculator")])
    assert named in caught.value.body["message"]


@pytest.mark.parametrize(
    ("style", "said"),
    [
        ("plain", "sk-test-0123456789"),
        ("upper", "SK-TEST-0123456789"),
        ("newline", "sk-test-0\n123456789"),
        ("quoted", '"sk-test-0" "123456789"'),
        ("escaped", "sk-test-0\\n123456789"),
    ],
)
def test_a_scripted_401_echoes_the_key_as_its_echo_style_says(style, said):
    keyed = openai.OpenAI(
        api_key="sk-test-0123456789", base_url="http://sim.covey/v1", http_client=httpx2.Client(transport=transport())
    )
    with pytest.raises(openai.AuthenticationError) as refused:
        keyed.chat.completions.create(
            model="sim", messages=[{"role": "user", "content": f"[sim:fail 401] [sim:echo {style}] hi"}]
        )
    assert refused.value.body["message"] == f"sim: scripted auth failure: Incorrect API key provided: {said}"


def test_an_unknown_echo_style_is_refused_naming_the_directive():
    with pytest.raises(openai.BadRequestError, match=r"\[sim:echo loud\]: expected a style of crlf, escaped, "):
        ask("[sim:echo loud] hi")


# --- content parts ------------------------------------------------------------


def test_an_image_part_is_read_by_its_size_and_a_later_one_is_named_in_the_answer():
    picture = png(6, 4)
    url = data_url(picture, "image/png")
    task = [{"type": "text", "text": "Describe it."}, {"type": "image_url", "image_url": {"url": url}}]
    response = ask(task)
    assert response.choices[0].message.content == f"done: Describe it. [image image/png 6x4, {len(picture)} bytes]"
    assert response.usage.prompt_tokens == sim_directives.prompt_tokens([{"role": "user", "content": task}], None)
    shown = {"role": "user", "content": [{"type": "text", "text": "From the tool:"}, task[1]]}
    later = ask("Draw it.", history=[{"role": "assistant", "content": "drawing"}, shown])
    assert later.choices[0].message.content == f"done: Draw it. (saw [image image/png 6x4, {len(picture)} bytes])"
