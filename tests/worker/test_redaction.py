"""What ``redact`` hides and what it keeps readable."""

from __future__ import annotations

import logging

import pytest

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
