"""What a chat request sends, in each endpoint's dialect, and what a refusal teaches it."""

from __future__ import annotations

import json

import httpx2
import pytest

from covey.config.settings import Settings
from covey.models import sim
from covey.models.catalog import Catalog, ModelEntry
from covey.models.chat import ModelError
from covey.models.dialect import Dialects
from covey.models.llm import LLM

CALC = {"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}
ANSWER = {"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]}
ASK = [{"role": "user", "content": "What is 6 * 7?"}]


class Endpoint:
    """The sim over a mock transport, refusing a request whose body holds one of
    ``refuse`` (a key) with ``status`` and ``body``; keeps each request's body."""

    def __init__(self, refuse: tuple[str, ...] = (), status: int = 500, body: object = None) -> None:
        self.bodies: list[dict] = []
        self._sim, self._refuse, self._status, self._body = sim.make_handler(), refuse, status, body

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        if any(key in body for key in self._refuse):
            return httpx2.Response(self._status, json=self._body)
        return self._sim(request)


def llm(endpoint: Endpoint, **entry) -> LLM:
    entries = {"local": ModelEntry(base_url="http://local.test/v1", api_key_env="K", model="sim", **entry)}
    settings = Settings(model_retries=0)
    catalog = Catalog(entries, settings, {"K": "k"})
    return LLM(settings, catalog, transport=httpx2.MockTransport(endpoint), dialects=Dialects())


def test_the_cap_goes_under_both_names_tools_may_be_called_and_tool_turns_carry_empty_content():
    endpoint = Endpoint()
    turns = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {}}]},
        {"role": "tool", "tool_call_id": "c", "content": "42"},
    ]
    llm(endpoint).call("local", turns, [CALC], 100)
    body = endpoint.bodies[0]
    assert (body["max_tokens"], body["max_completion_tokens"], body["tool_choice"]) == (100, 100, "auto")
    assert body["messages"][1]["content"] == "" and turns[1]["content"] is None  # the caller's turns kept
    assert (body["stream"], body["stream_options"]) == (True, {"include_usage": True})
    llm(endpoint).call("local", ASK, [], 100)
    assert "tool_choice" not in endpoint.bodies[1] and "tools" not in endpoint.bodies[1]


def test_a_models_file_entry_names_the_cap_and_turns_streaming_off():
    endpoint = Endpoint()
    reply, usage = llm(endpoint, reply_cap=["max_completion_tokens"], stream=False).call("local", ASK, [], 100)
    body = endpoint.bodies[0]
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body and "stream" not in body
    assert reply.tool_calls == [] and usage.cycles == 1


def test_openais_own_api_is_sent_the_cap_under_its_current_name_alone():
    def default(**given):
        return Catalog({}, Settings().model_copy(update=given), {}).endpoint("gpt-x").reply_caps

    assert default(openai_api_key="k") == ("max_completion_tokens",)
    assert default(openai_base_url="http://127.0.0.1:8080/v1") == ("max_tokens", "max_completion_tokens")


def test_an_endpoint_refusing_json_schema_is_asked_again_in_tools_mode_and_keeps_it():
    refusal = {"error": {"message": "Unsupported response_format: json_schema\nTraceback (most recent call last):"}}
    endpoint = Endpoint(refuse=("response_format",), body=refusal)
    model = llm(endpoint)
    reply, _ = model.call("local", ASK, [], 100, schema=ANSWER)
    assert reply.content is not None and reply.tool_calls == []  # the answer call, handed back as content
    assert ["response_format" in b for b in endpoint.bodies] == [True, False]
    assert endpoint.bodies[1]["tools"][-1]["function"]["name"] == "answer"
    model.call("local", ASK, [], 100, schema=ANSWER)
    assert len(endpoint.bodies) == 3 and "response_format" not in endpoint.bodies[2]  # learnt: asked once
    [row] = [row for row in model.catalog.served(model.dialects) if row.name == "local"]
    assert row.structured == "tools"


def test_an_endpoint_refusing_a_name_of_the_cap_is_sent_the_other_alone():
    refusal = {"error": {"message": "Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens' instead."}}
    endpoint = Endpoint(refuse=("max_tokens",), status=400, body=refusal)
    llm(endpoint).call("local", ASK, [], 100)
    assert [("max_tokens" in b, b["max_completion_tokens"]) for b in endpoint.bodies] == [(True, 100), (False, 100)]


@pytest.mark.parametrize(
    "status, body, said",
    [
        (500, {"error": {"message": "boom\n  File 'x.py', line 1\nValueError"}}, "HTTP 500: boom"),
        (
            422,
            {"detail": [{"loc": ["body", "messages", 1, "content"], "msg": "Input should be a valid string"}] * 7},
            "HTTP 422: body.messages.1.content: Input should be a valid string (and 6 more)",
        ),
        (400, {"detail": "x" * 1000}, "HTTP 400: " + "x" * 299 + "…"),
    ],
)
def test_a_providers_error_is_one_line(status, body, said):
    with pytest.raises(ModelError) as raised:
        llm(Endpoint(refuse=("messages",), status=status, body=body)).call("local", ASK, [], 100)
    assert str(raised.value) == f"model call failed: {said}"


def test_a_server_that_drops_tool_messages_is_sent_each_result_as_a_user_message_naming_its_call():
    endpoint = Endpoint()
    turns = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"name": "calculator"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "42"},
    ]
    llm(endpoint, tool_results="user", body={"repeat_penalty": 1.0}).call("local", turns, [CALC], 100)
    body = endpoint.bodies[0]
    assert body["messages"][2] == {"role": "user", "content": "The result of calculator: 42"}
    assert body["repeat_penalty"] == 1.0


def test_a_models_file_body_may_not_set_what_covey_sends():
    with pytest.raises(ValueError, match="max_tokens, stream: covey sets these itself"):
        ModelEntry(base_url="http://x/v1", api_key_env="K", body={"stream": False, "max_tokens": 9})


def test_an_empty_stream_for_a_request_with_tools_teaches_the_endpoint_to_ask_those_unstreamed():
    sim_ = sim.make_handler()
    bodies = []

    def endpoint(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        bodies.append(body)
        if body.get("stream") and body.get("tools"):  # llama-cpp-python's auto tool choice
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=b"")
        return sim_(request)

    entries = {"local": ModelEntry(base_url="http://local.test/v1", api_key_env="K", model="sim")}
    settings = Settings(model_retries=0)
    model = LLM(settings, Catalog(entries, settings, {"K": "k"}), httpx2.MockTransport(endpoint), Dialects())
    reply, _ = model.call("local", ASK, [CALC], 100)
    assert reply.tool_calls[0].name == "calculator"
    model.call("local", ASK, [CALC], 100)
    model.call("local", ASK, [], 100)
    assert [(bool(b.get("tools")), b.get("stream", False)) for b in bodies] == [
        (True, True),
        (True, False),
        (True, False),  # learnt: asked unstreamed at once
        (False, True),  # a request without tools still streams, and is cut at its cap
    ]
