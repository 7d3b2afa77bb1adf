"""Checking JSON answers against the schema a call asked for."""

from __future__ import annotations

import pytest

from covey.models.structured import (
    InvalidSchema,
    SchemaMismatch,
    check_schema,
    parse,
    response_format,
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
