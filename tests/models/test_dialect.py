"""A refusal naming a parameter teaches the dialect an endpoint is spoken in."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from covey.models.dialect import REPLY_CAPS, Dialect, Dialects

GIVEN = Dialect(caps=REPLY_CAPS, structured="json_schema")


def test_a_refused_json_schema_is_asked_for_in_tools_mode():
    taught = GIVEN.refused("Unsupported response_format type json_schema", structured=True)
    assert taught == (Dialect(caps=REPLY_CAPS, structured="tools"), "asks for JSON answers in tools mode")


@pytest.mark.parametrize("mode", ["json_object", "json_object_schema"])
def test_a_refused_json_object_mode_is_asked_for_in_tools_mode_too(mode):
    given = Dialect(caps=REPLY_CAPS, structured=mode)
    taught = given.refused("'response_format.type' must be 'json_schema' or 'text'", structured=True)
    assert taught == (Dialect(caps=REPLY_CAPS, structured="tools"), "asks for JSON answers in tools mode")
    assert Dialect(caps=REPLY_CAPS, structured="tools").refused("response_format", structured=True) is None


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


@dataclass(frozen=True)
class Entry:
    """A models-file entry as far as its dialect goes."""

    dialect: Dialect
    key: tuple[str | None, str] = ("http://llm.local/v1", "smollm2")


def test_what_a_server_refused_is_learnt_for_each_entry_of_it_and_each_keeps_the_rest_of_its_own():
    plain, own_mode = Entry(GIVEN), Entry(Dialect(caps=REPLY_CAPS, structured="json_object"))
    capped_alone = Entry(Dialect(caps=("max_completion_tokens",), structured="json_schema"))
    elsewhere = Entry(GIVEN, ("http://other.local/v1", "smollm2"))
    dialects = Dialects()
    taught, _ = GIVEN.refused("extra fields not permitted: max_completion_tokens", structured=False)
    dialects.learn(plain, taught)
    taught, _ = dialects.of(plain).refused("Unsupported response_format type json_schema", structured=True)
    dialects.learn(plain, taught)

    assert dialects.of(plain) == Dialect(caps=("max_tokens",), structured="tools")
    assert dialects.of(own_mode) == Dialect(caps=("max_tokens",), structured="json_object")
    assert dialects.of(capped_alone) == Dialect(caps=("max_completion_tokens",), structured="tools")
    assert dialects.of(elsewhere) == GIVEN

    dialects.learn(own_mode, replace(dialects.of(own_mode), stream_tools=False))
    assert not dialects.of(plain).stream_tools and dialects.of(plain).caps == ("max_tokens",)

    taught, _ = dialects.of(own_mode).refused("unknown response_format type json_object", structured=True)
    dialects.learn(own_mode, taught)
    assert dialects.of(own_mode).structured == "tools"
    assert Dialects().of(own_mode).structured == "json_object"  # another worker's: nothing learnt there
