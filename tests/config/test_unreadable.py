"""Which queue entries kombu cannot make a message of (``covey.config.unreadable.why``)."""

from __future__ import annotations

import pytest

from covey.config.unreadable import why

GOOD = {
    "body": "e30=",
    "headers": {"task": "covey.run_job", "id": "j"},
    "properties": {
        "delivery_tag": "t",
        "delivery_info": {"exchange": "", "routing_key": "covey"},
        "body_encoding": "base64",
    },
}


def changed(**fields):
    return {**GOOD, **fields}


def test_an_entry_kombu_reads_is_let_through():
    assert why(GOOD) is None
    assert why(changed(body=None)) is None
    assert why(changed(headers=None)) is None


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ([1, 2], "a JSON list, not an object"),
        ("text", "a JSON str, not an object"),
        (changed(properties=[]), "no 'properties' object"),
        (changed(properties={"delivery_info": {}}), "no 'delivery_tag'"),
        (changed(properties={"delivery_tag": "t", "delivery_info": {"exchange": ""}}), "delivery_info is not"),
        (changed(properties={"delivery_tag": "t", "delivery_info": "x"}), "delivery_info is not"),
        (changed(headers=[1]), "headers are not an object"),
        (changed(properties={**GOOD["properties"], "body_encoding": "rot13"}), "body encoding 'rot13'"),
        (changed(body=7), "its body is a JSON int"),
        (changed(body="!!!not base64!!!"), "its body is not base64"),
    ],
)
def test_an_unreadable_entry_is_told_why(entry, said):
    assert said in (why(entry) or "")
