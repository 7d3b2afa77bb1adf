"""Checking JSON answers against the schema a call asked for."""

from __future__ import annotations

import pytest

from covey.models.structured import InvalidSchema, SchemaMismatch, check_schema, parse, response_format

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


def test_the_response_format_is_openais_json_schema_shape():
    assert response_format(SCORE) == {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCORE}}
