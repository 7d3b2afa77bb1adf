"""The models file, endpoint resolution, and what reaches the provider's request."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from covey.config.settings import Settings
from covey.models import sim
from covey.models.catalog import Catalog, ModelParams, ModelsFileError, UnservableModel, load
from covey.models.chat import ModelError
from covey.models.llm import LLM
from covey.spec import InvalidSpec, JobSpec
from tests import sse

FAST = """
[models.fast]
base_url = "http://fast.example/v1"
api_key_env = "FAST_KEY"
model = "provider-fast-1"
params = { temperature = 0.2, seed = 7 }

[models.plain]
base_url = "http://plain.example/v1"
api_key_env = "PLAIN_KEY"
"""


def models_file(tmp_path: Path, text: str = FAST) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


def catalog(tmp_path: Path, environ: dict[str, str] | None = None, text: str = FAST, **settings) -> Catalog:
    s = Settings(models=models_file(tmp_path, text), **settings)
    return Catalog.from_settings(s, environ={"FAST_KEY": "k-fast"} if environ is None else environ)


def test_a_models_file_maps_names_to_endpoints(tmp_path):
    fast = catalog(tmp_path).endpoint("fast")
    assert (fast.base_url, fast.key_env, fast.model, fast.api_key) == (
        "http://fast.example/v1",
        "FAST_KEY",
        "provider-fast-1",
        "k-fast",
    )
    assert fast.params == ModelParams(temperature=0.2, seed=7)
    assert "k-fast" not in repr(fast)


def test_the_provider_model_id_defaults_to_the_covey_name(tmp_path):
    assert catalog(tmp_path, {"PLAIN_KEY": "k"}).endpoint("plain").model == "plain"


def test_sim_is_in_process_even_with_a_default_endpoint(tmp_path):
    assert catalog(tmp_path, openai_base_url="http://default.example/v1").endpoint("sim").in_process


def test_other_names_go_to_the_default_endpoint_under_their_own_name(tmp_path):
    other = catalog(tmp_path, openai_base_url="http://default.example/v1").endpoint("gpt-4o-mini")
    assert (other.base_url, other.model, other.api_key) == ("http://default.example/v1", "gpt-4o-mini", None)
    keyed = Catalog.from_settings(Settings(OPENAI_API_KEY="sk-x"), environ={}).endpoint("gpt-4o-mini")
    assert (keyed.base_url, keyed.api_key) == ("https://api.openai.com/v1", "sk-x")


def test_a_name_no_endpoint_serves_is_refused_saying_what_to_configure(tmp_path):
    with pytest.raises(UnservableModel, match=r"model 'gpt-9': no endpoint .*COVEY_MODELS.*COVEY_OPENAI_BASE_URL"):
        catalog(tmp_path).endpoint("gpt-9")


def test_a_model_whose_key_variable_is_unset_is_refused(tmp_path):
    with pytest.raises(UnservableModel, match="model 'plain': its key variable PLAIN_KEY is not set"):
        catalog(tmp_path, {"PLAIN_KEY": ""}).endpoint("plain")


def test_covey_models_lists_without_keys(tmp_path):
    rows = catalog(tmp_path, OPENAI_API_KEY="sk-secret").served()
    assert [(r.name, r.endpoint, r.model, r.key_env, r.key_set) for r in rows] == [
        ("sim", "in-process", "sim", None, None),
        ("fast", "http://fast.example/v1", "provider-fast-1", "FAST_KEY", True),
        ("plain", "http://plain.example/v1", "plain", "PLAIN_KEY", False),
        ("*", "https://api.openai.com/v1", "*", "OPENAI_API_KEY", True),
    ]
    assert rows[1].params == {"temperature": 0.2, "seed": 7}
    assert "k-fast" not in str(rows) and "sk-secret" not in str(rows)


@pytest.mark.parametrize(
    "text, message",
    [
        ('[models.sim]\nbase_url = "http://x/v1"\napi_key_env = "K"', "model 'sim' is built in"),
        (
            '[models.a]\nbase_url = "http://x/v1"\napi_key_env = "K"\nparams = { temperature = 3 }',
            "model 'a': params.temperature: Input should be less than or equal to 2",
        ),
        (
            '[models.a]\nbase_url = "http://x/v1"\napi_key_env = "K"\nparams = { frequency = 1 }',
            "model 'a': params.frequency: Extra inputs are not permitted",
        ),
        (
            '[models.a]\nbase_url = "http://x/v1"\napi_key_env = "K"\ntemperature = 1',
            "model 'a': temperature: Extra inputs are not permitted",
        ),
        ('[models.a]\nbase_url = "http://x/v1"', "model 'a': api_key_env: Field required"),
        ('[models.a]\nbase_url = "not a url"\napi_key_env = "K"', "model 'a': base_url: Input should be a valid URL"),
        ('[modles.a]\nbase_url = "http://x/v1"', "modles: Extra inputs are not permitted"),
        ("[models.a\n", "not valid TOML"),
    ],
)
def test_a_bad_models_file_names_the_file_the_model_and_the_field(tmp_path, text, message):
    path = models_file(tmp_path, text)
    with pytest.raises(ModelsFileError, match=rf"^{path}: .*") as caught:
        load(path)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_key_pasted_for_its_variable_name_is_refused_and_not_echoed(tmp_path):
    path = models_file(tmp_path, '[models.a]\nbase_url = "http://x/v1"\napi_key_env = "sk-live-0123456789"')
    with pytest.raises(ModelsFileError, match="model 'a': api_key_env: must be the NAME") as caught:
        load(path)
    assert "sk-live" not in str(caught.value)


def test_a_missing_models_file_is_named(tmp_path):
    with pytest.raises(ModelsFileError, match="nope.toml: cannot read the models file"):
        load(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    "params, field",
    [
        ({"temperature": 2.5}, "temperature"),
        ({"top_p": 1.5}, "top_p"),
        ({"seed": 1.5}, "seed"),
        ({"seed": True}, "seed"),
        ({"stop": "x"}, "stop"),
    ],
)
def test_a_jobs_model_params_are_validated_at_the_wire(params, field):
    with pytest.raises(InvalidSpec, match=f"model_params.{field}:"):
        JobSpec.parse({"task": "x", "model_params": params})


class Captured:
    """A remote endpoint that answers as the sim and keeps every request."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []
        self._sim = sim.make_handler()

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return self._sim(request)

    def bodies(self) -> list[dict]:
        return [json.loads(r.content) for r in self.requests]


def llm(tmp_path, endpoint: Captured, **settings) -> LLM:
    s = Settings(models=models_file(tmp_path), model_retries=0, **settings)
    return LLM(s, Catalog.from_settings(s, environ={"FAST_KEY": "k-fast"}), transport=httpx2.MockTransport(endpoint))


def test_the_provider_model_id_and_merged_params_reach_the_request(tmp_path):
    endpoint = Captured()
    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    reply, usage = llm(tmp_path, endpoint).call(
        "fast", messages, [], 100, params=ModelParams(temperature=0.9, top_p=0.5)
    )
    assert reply.content and usage.cycles == 1
    [request] = endpoint.requests
    assert str(request.url) == "http://fast.example/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer k-fast"
    body = endpoint.bodies()[0]
    assert body["model"] == "provider-fast-1"
    # the job's temperature and top_p over the file's; the file's seed kept
    assert (body["temperature"], body["top_p"], body["seed"]) == (0.9, 0.5, 7)


def test_sim_stays_in_process_with_a_default_endpoint_set(tmp_path):
    endpoint = Captured()
    reply, _ = llm(tmp_path, endpoint, openai_base_url="http://default.example/v1").call(
        "sim", [{"role": "user", "content": "[sim:answer hi] go"}], [], 100, params=ModelParams(seed=1)
    )
    assert reply.content == "hi"
    assert endpoint.requests == []


def test_a_call_to_an_unservable_model_is_a_model_error(tmp_path):
    with pytest.raises(ModelError, match="model 'plain': its key variable PLAIN_KEY is not set"):
        llm(tmp_path, Captured()).call("plain", [{"role": "user", "content": "x"}], [], 100)


ANSWER = {
    "type": "object",
    "properties": {"value": {"type": "integer"}},
    "required": ["value"],
    "additionalProperties": False,
}


def structured_llm(tmp_path, mode: str, endpoint) -> LLM:
    text = FAST.replace('model = "provider-fast-1"', f'model = "provider-fast-1"\nstructured = "{mode}"')
    s = Settings(models=models_file(tmp_path, text), model_retries=0)
    return LLM(s, Catalog.from_settings(s, environ={"FAST_KEY": "k-fast"}), transport=httpx2.MockTransport(endpoint))


def test_by_default_a_schema_is_sent_as_a_strict_json_schema_response_format(tmp_path):
    endpoint = Captured()
    llm(tmp_path, endpoint).call("fast", [{"role": "user", "content": "What is 6 * 7?"}], [], 100, schema=ANSWER)
    body = endpoint.bodies()[0]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": ANSWER, "strict": True},
    }


def test_a_json_object_endpoint_is_shown_the_schema_and_asked_for_an_object(tmp_path):
    endpoint = Captured()
    messages = [{"role": "user", "content": "What is 6 * 7?"}]
    reply, _ = structured_llm(tmp_path, "json_object", endpoint).call("fast", messages, [], 100, schema=ANSWER)
    body = endpoint.bodies()[0]
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"][-1]["role"] == "system" and json.dumps(ANSWER) in body["messages"][-1]["content"]
    assert json.loads(reply.content) == {"answer": "42"}  # the sim's json_object answer, handed back as is


def test_a_json_object_schema_endpoint_gets_the_schema_in_the_response_format_and_no_note(tmp_path):
    endpoint = Captured()
    messages = [{"role": "user", "content": "What is 6 * 7?"}]
    structured_llm(tmp_path, "json_object_schema", endpoint).call("fast", messages, [], 100, schema=ANSWER)
    body = endpoint.bodies()[0]
    assert body["response_format"] == {"type": "json_object", "schema": ANSWER}
    assert body["messages"] == messages  # the server's grammar holds the reply: the model is not shown the schema


def test_a_tools_endpoint_answers_through_a_function_named_after_the_schema(tmp_path):
    bodies = []

    def endpoint(request):
        bodies.append(json.loads(request.content))
        call = {"id": "c1", "type": "function", "function": {"name": "verdict", "arguments": '{"value": 42}'}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        usage = {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
        body = {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice], "usage": usage}
        return sse.answer(request, body)

    calc = {"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}
    llm_ = structured_llm(tmp_path, "tools", endpoint)
    reply, _ = llm_.call("fast", [{"role": "user", "content": "x"}], [], 100, schema=ANSWER, schema_name="verdict")
    assert (reply.content, reply.tool_calls, reply.finish_reason) == ('{"value": 42}', [], "stop")
    alone = bodies[0]
    assert "response_format" not in alone
    assert alone["tool_choice"] == {"type": "function", "function": {"name": "verdict"}}
    assert alone["tools"][-1]["function"] | {"description": ""} == {
        "name": "verdict",
        "description": "",
        "parameters": ANSWER,
        "strict": True,
    }
    llm_.call("fast", [{"role": "user", "content": "x"}], [calc], 100, schema=ANSWER, schema_name="verdict")
    beside = bodies[1]
    assert beside["tool_choice"] == "required" and [t["function"]["name"] for t in beside["tools"]] == [
        "calculator",
        "verdict",
    ]


def test_an_unknown_structured_mode_is_refused_naming_the_field(tmp_path):
    text = FAST.replace('model = "provider-fast-1"', 'model = "provider-fast-1"\nstructured = "xml"')
    with pytest.raises(ModelsFileError, match="structured"):
        catalog(tmp_path, text=text)
