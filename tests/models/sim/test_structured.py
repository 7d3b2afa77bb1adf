"""Structured output from the sim model, through the real OpenAI SDK on the in-process transport."""

from __future__ import annotations

import json
import math
from typing import Literal

import httpx2
import openai
import pydantic
import pytest

from covey.models.sim.handler import BAD_JSON, transport
from covey.models.sim.structured import Answers, instance
from covey.tools.registry import schema

TOOLS = [schema(n) for n in ("spawn_agents", "finish", "calculator")]


class Detail(pydantic.BaseModel):
    count: int
    tags: list[str]


class Report(pydantic.BaseModel):
    summary: str
    score: float
    ok: bool
    kind: Literal["brief", "full"]
    detail: Detail
    note: str | None


def client():
    http = httpx2.Client(transport=transport())
    return openai.OpenAI(api_key="sim", base_url="http://sim.covey/v1", http_client=http, max_retries=0)


def messages(task, history=()):
    return [{"role": "user", "content": task}, *history]


def schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": True}}


def create(task, response_format, history=(), **kwargs):
    return client().chat.completions.create(
        model="sim", messages=messages(task, history), response_format=response_format, **kwargs
    )


def document(task, schema, **kwargs):
    return json.loads(create(task, schema_format(schema), **kwargs).choices[0].message.content)


def obj(**properties):
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


# --- instances through the SDK's own parse -------------------------------------------


def test_a_pydantic_response_format_parses_into_the_model():
    completion = client().chat.completions.parse(
        model="sim", messages=messages("Review [sim:answer all good]"), response_format=Report
    )
    report = completion.choices[0].message.parsed
    assert isinstance(report, Report)
    assert report.model_dump(exclude={"score"}) == {
        "summary": "all good",
        "ok": True,
        "kind": "brief",
        "detail": {"count": 1, "tags": ["all good"]},
        "note": "all good",
    }
    assert 0 <= report.score <= 1
    assert completion.choices[0].finish_reason == "stop"


def test_structured_output_answers_at_once_even_with_tools_and_a_spawn_directive():
    response = create("Survey [sim:spawn width=3 depth=2]", schema_format(obj(summary={"type": "string"})), tools=TOOLS)
    choice = response.choices[0]
    assert choice.message.tool_calls is None
    assert json.loads(choice.message.content) == {"summary": "done: Survey"}
    assert choice.finish_reason == "stop"
    assert response.usage.completion_tokens == math.ceil(len(choice.message.content) / 4)


# --- how each schema keyword is met ----------------------------------------------------


def test_arithmetic_fills_strings_and_numbers_that_can_hold_it():
    schema = obj(text={"type": "string"}, whole={"type": "integer"}, real={"type": "number"})
    assert document("What is 6 * 7? [sim:answer nope]", schema) == {"text": "42", "whole": 42, "real": 42}
    assert document("What is 7 / 2?", schema) == {"text": "3.5", "whole": 1, "real": 3.5}


def test_numbers_without_arithmetic_are_a_task_digest_or_one_and_deterministic():
    schema = obj(real={"type": "number"}, whole={"type": "integer"})
    first, again, other = document("Rate it", schema), document("Rate it", schema), document("Rate that", schema)
    assert first == again
    assert first["whole"] == 1
    assert 0 <= first["real"] <= 1
    assert first["real"] != other["real"]


def test_numbers_are_clamped_to_minimum_and_maximum():
    schema = obj(
        low={"type": "integer", "minimum": 5},
        high={"type": "number", "maximum": 10},
        inside={"type": "integer", "minimum": 2.5, "maximum": 100},
        real={"type": "number", "minimum": 3},
    )
    assert document("What is 6 * 7?", schema) == {"low": 42, "high": 10, "inside": 42, "real": 42}
    assert document("Rate it", schema)["low"] == 5
    assert document("Rate it", schema)["inside"] == 3
    assert document("Rate it", schema)["real"] == 3


def test_const_enum_arrays_booleans_and_the_rest():
    schema = obj(
        fixed={"const": "v1"},
        pick={"enum": ["b", "a"]},
        many={"type": "array", "items": {"type": "boolean"}, "minItems": 3},
        one={"type": "array", "items": {"type": "string"}},
        either={"type": ["integer", "null"]},
        nothing={"type": "null"},
        untyped={},
    )
    assert document("Hi", schema) == {
        "fixed": "v1",
        "pick": "b",
        "many": [True, True, True],
        "one": ["done: Hi"],
        "either": 1,
        "nothing": None,
        "untyped": None,
    }


def test_a_recursive_schema_ends_in_null():
    schema = {"$defs": {"Node": obj(name={"type": "string"}, child={"$ref": "#/$defs/Node"})}, "$ref": "#/$defs/Node"}
    assert document("Hi", schema) == {"name": "done: Hi", "child": None}


def test_instance_is_a_pure_function_of_schema_and_answers():
    answers = Answers(text="t", number=None, fraction=0.25)
    assert instance({"type": "number"}, answers) == 0.25
    assert instance({"type": "number", "minimum": 0.5}, answers) == 0.5
    assert instance("not a schema", answers) is None


def test_json_object_answers_the_text_answer():
    response = create("What is 2 + 3?", {"type": "json_object"})
    assert json.loads(response.choices[0].message.content) == {"answer": "5"}


# --- failures, cuts and billing --------------------------------------------------------


def test_bare_bad_json_is_off_the_schema_however_often_it_is_asked():
    task = "Review [sim:fail bad_json]"
    history = [{"role": "assistant", "content": BAD_JSON}, {"role": "user", "content": "Try again."}]
    again = create(task, schema_format(Report.model_json_schema()), history=history)
    assert again.choices[0].message.content == BAD_JSON


def test_bad_json_once_is_json_off_the_schema_on_the_first_call_only():
    task = "Review [sim:fail bad_json once]"
    with pytest.raises(pydantic.ValidationError):
        client().chat.completions.parse(model="sim", messages=messages(task), response_format=Report)
    first = create(task, schema_format(Report.model_json_schema()))
    assert first.choices[0].message.content == BAD_JSON
    history = [{"role": "assistant", "content": BAD_JSON}, {"role": "user", "content": "Try again."}]
    later = client().chat.completions.parse(model="sim", messages=messages(task, history), response_format=Report)
    assert later.choices[0].message.parsed.summary == "done: Review"


def test_structured_output_is_cut_by_max_tokens():
    schema = obj(summary={"type": "string"})
    response = create("[sim:answer " + "y" * 100 + "]", schema_format(schema), max_completion_tokens=4)
    assert response.choices[0].finish_reason == "length"
    assert response.choices[0].message.content == json.dumps({"summary": "y" * 100})[:16]
    assert response.usage.completion_tokens == 4
    with pytest.raises(openai.LengthFinishReasonError):
        client().chat.completions.parse(
            model="sim", messages=messages("[sim:answer " + "y" * 100 + "]"), response_format=Report, max_tokens=4
        )


def test_tokens_directive_pads_json_that_still_parses():
    response = create("Hi [sim:tokens 20]", schema_format(obj(summary={"type": "string"})))
    assert json.loads(response.choices[0].message.content) == {"summary": "done: Hi"}
    assert response.usage.completion_tokens == 20


@pytest.mark.parametrize(
    "response_format, named",
    [
        ({"type": "xml"}, "'type' of text, json_object or json_schema"),
        ({"type": "json_schema", "json_schema": {"name": "out"}}, "needs 'json_schema'"),
    ],
)
def test_malformed_response_formats_are_a_400(response_format, named):
    with pytest.raises(openai.BadRequestError) as caught:
        create("Hi", response_format)
    assert named in caught.value.body["message"]


def test_a_text_response_format_is_an_ordinary_reply():
    assert create("Hi", {"type": "text"}).choices[0].message.content == "done: Hi"
