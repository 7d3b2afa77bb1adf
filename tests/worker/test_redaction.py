"""What ``redact`` hides and what it keeps readable."""

from __future__ import annotations

import json
import logging

import pytest

from covey.worker import redaction
from covey.worker.redaction import Redacting, redact

KEY = "sk-proj-0123456789abcdefABCDEF"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"HTTP 401: bad key, got Authorization: Bearer {KEY}", "HTTP 401: bad key, got Authorization: ***"),
        ('{"authorization": "Bearer abcdefghijkl", "x": 1}', '{"authorization": "***", "x": 1}'),
        ("x-api-key: abcdef0123", "x-api-key: ***"),
        (f"invalid key {KEY} given", "invalid key sk-*** given"),
        ("token bearer abcdefghijkl expired", "token bearer *** expired"),
        ("GET /v1?api_key=abc123&x=1", "GET /v1?api_key=***&x=1"),
        ("cannot reach redis://:hunter22@10.0.0.5:6379/0", "cannot reach redis://:***@10.0.0.5:6379/0"),
        ("https://ops:pw@models.internal/v1", "https://ops:***@models.internal/v1"),
        (
            "What is 6 * 7? 42, in 0.3s (https://api.openai.com/v1)",
            "What is 6 * 7? 42, in 0.3s (https://api.openai.com/v1)",
        ),
    ],
)
def test_credentials_are_masked_and_the_rest_kept(text, shown):
    assert redact(text) == shown


def test_a_log_record_and_its_traceback_are_redacted_before_formatting():
    try:
        raise RuntimeError(f"provider said: Authorization: Bearer {KEY}")
    except RuntimeError as e:
        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "call failed: %s", (e,), exc_info=(type(e), e, None)
        )
    assert Redacting().filter(record)
    line = logging.Formatter().format(record)
    assert KEY not in line and "call failed: provider said: Authorization: ***" in line


HELD = "fake-key-" + "0123456789abcdef" * 2  # no provider's prefix: only holding it masks it
ECHOES = {
    "as sent": HELD,
    "upper-cased": HELD.upper(),
    "split by a line end": f"{HELD[:20]}\n{HELD[20:]}",
    "split by CRLF": f"{HELD[:20]}\r\n{HELD[20:]}",
    "split by a space": f"{HELD[:12]} {HELD[12:]}",
    "split by a tab": f"{HELD[:30]}\t{HELD[30:]}",
    "in two quoted halves": f'"{HELD[:20]}" "{HELD[20:]}"',
    "split by JSON's escaped line end": json.dumps(f"{HELD[:20]}\n{HELD[20:]}")[1:-1],
}


@pytest.fixture
def held():
    redaction.hold([HELD, "short"])
    yield
    redaction.hold([])


@pytest.mark.parametrize("how", list(ECHOES))
def test_a_held_secret_is_masked_however_an_echo_splits_or_cases_it(held, how):
    text = f"HTTP 401: the key {ECHOES[how]} is not valid"
    quote = '"' if how == "in two quoted halves" else ""  # the quotes around the halves, kept
    assert redact(text) == f"HTTP 401: the key {quote}***{quote} is not valid"
    assert HELD[-8:].encode() not in redaction.squeeze(redact(text))


def test_text_without_a_held_secret_is_kept_as_it_is(held):
    for text in ("short and sweet", HELD[:20] + " and no more", "fake-key-0123"):
        assert redact(text) == text
    assert redaction.clean({"answer": [HELD, 3]}) == {"answer": ["***", 3]}
