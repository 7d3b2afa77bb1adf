"""Checking JSON answers against the schema a call asked for."""

from __future__ import annotations

import pytest

from covey.models.structured import (
    InvalidSchema,
    SchemaMismatch,
    asking,
    check_schema,
    parse,
    response_format,
    strict_form,
    strict_problems,
)

SCORE = {
    "type": "object",
    "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}, "reason": {"type": "string"}},
    "required": ["score"],
}


def test_a_matching_reply_is_parsed():
    assert parse('{"score": 0.8, "reason": "sound"}', SCORE) == {"score": 0.8, "reason": "sound"}


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"reason": "no score"}', "at the top level: 'score' is a required property"),
        ('{"score": 7}', "at score: 7 is greater than the maximum of 1"),
        ("score: high", "model reply is not JSON"),
        (None, "model reply is not JSON"),
    ],
)
def test_a_reply_that_misses_the_schema_says_where(content, message):
    with pytest.raises(SchemaMismatch, match=message):
        parse(content, SCORE)


def test_an_invalid_schema_is_refused():
    check_schema(SCORE)
    with pytest.raises(InvalidSchema, match="not a valid JSON Schema"):
        check_schema({"type": "mystery"})


STRICT = {
    "type": "object",
    "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}, "reason": {"type": ["string", "null"]}},
    "required": ["score", "reason"],
    "additionalProperties": False,
}


def test_a_schema_that_fits_strict_mode_is_sent_strict_and_any_other_is_not():
    assert response_format(STRICT, "score") == {
        "type": "json_schema",
        "json_schema": {"name": "score", "schema": STRICT, "strict": True},
    }
    assert response_format(SCORE) == {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCORE}}


@pytest.mark.parametrize(
    "schema, problem",
    [
        (SCORE, "#: additionalProperties must be false"),
        (SCORE, "#: every property must be required"),
        (
            {**STRICT, "properties": {**STRICT["properties"], "reason": {"type": "string", "minLength": 1}}},
            "#/properties/reason: 'minLength' is not supported",
        ),
        ({"type": "array", "items": STRICT}, "the top level: strict mode needs an object"),
        (
            {
                **STRICT,
                "properties": {
                    "score": {"type": "array", "items": {"type": "object", "properties": {}}},
                    "reason": {"type": "string"},
                },
            },
            "#/properties/score/items: additionalProperties must be false",
        ),
        ({**STRICT, "default": {}}, "#: 'default' is not supported"),
    ],
)
def test_strict_problems_say_where_a_schema_misses_strict_mode(schema, problem):
    assert problem in strict_problems(schema)
    assert strict_problems(STRICT) == []


BOUNDED = {
    "type": "object",
    "properties": {
        "maxLength": {"type": "string", "maxLength": 5},  # a property so named is kept
        "items": {"type": "array", "items": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "null"}]}},
    },
    "required": ["maxLength", "items"],
    "additionalProperties": False,
}


def test_a_strict_request_leaves_out_the_length_bounds_strict_mode_refuses_and_the_reply_is_held_to_them():
    unbounded = {
        **BOUNDED,
        "properties": {
            "maxLength": {"type": "string"},
            "items": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        },
    }
    assert strict_form(BOUNDED) == unbounded
    assert response_format(BOUNDED, "b")["json_schema"] == {"name": "b", "schema": unbounded, "strict": True}
    assert strict_form(SCORE) is None  # no bound left out makes a loose schema strict
    with pytest.raises(SchemaMismatch, match="at maxLength: 'longer' is too long"):
        parse('{"maxLength": "longer", "items": []}', BOUNDED)


def test_json_object_schema_sends_the_whole_schema_in_a_json_object_response_format_and_shows_it_nowhere():
    messages = [{"role": "user", "content": "go"}]
    sent, tools, asked = asking("json_object_schema", BOUNDED, "b", messages, [])
    assert (sent, tools, asked) == (messages, [], {"response_format": {"type": "json_object", "schema": BOUNDED}})


def test_a_raw_newline_inside_a_string_is_read_as_the_newline():
    assert parse('{"score": 0.5, "reason": "two\nlines"}', SCORE) == {"score": 0.5, "reason": "two\nlines"}
