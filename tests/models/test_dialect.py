"""A refusal naming a parameter teaches the dialect an endpoint is spoken in."""

from __future__ import annotations

from covey.models.dialect import REPLY_CAPS, Dialect

GIVEN = Dialect(caps=REPLY_CAPS, structured="json_schema")


def test_a_refused_json_schema_is_asked_for_in_tools_mode():
    taught = GIVEN.refused("Unsupported response_format type json_schema", structured=True)
    assert taught == (Dialect(caps=REPLY_CAPS, structured="tools"), "asks for JSON answers in tools mode")


def test_a_plain_request_is_not_taught_by_a_message_naming_response_format():
    assert GIVEN.refused("response_format is not supported", structured=False) is None


def test_the_cap_name_a_refusal_names_first_is_dropped():
    openai = (
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    )
    assert GIVEN.refused(openai, structured=False) == (
        Dialect(caps=("max_completion_tokens",), structured="json_schema"),
        "sends the reply cap as max_completion_tokens alone",
    )
    other = "extra fields not permitted: max_completion_tokens"
    assert GIVEN.refused(other, structured=False)[0].caps == ("max_tokens",)


def test_the_last_name_of_the_cap_is_never_dropped_and_unrelated_refusals_teach_nothing():
    alone = Dialect(caps=("max_tokens",), structured="tools")
    assert alone.refused("max_tokens is too large", structured=True) is None
    assert GIVEN.refused("model not found", structured=True) is None
