"""Secrets out of what people read: results, trees, log lines, ``covey models``.

A provider's error may echo the request's ``Authorization`` header, an SDK's
message may quote a key, a URL may carry a password. ``redact`` replaces each
with ``***`` before the text becomes an agent's error or a log line, keeping the
rest readable (the header's name, the key's prefix, the URL's user and host).
"""

from __future__ import annotations

import logging
import re

MASK = "***"

# Each pattern with its replacement: the groups kept, the credential masked.
_PATTERNS = [
    # An auth header as echoed, to the end of its value: `Authorization: Bearer x`, `"x-api-key": "x"`.
    (
        re.compile(r"""((?:proxy-)?authorization|x-api-key|api-key)(["']?\s*[:=]\s*["']?)[^"'\n,}]+""", re.IGNORECASE),
        rf"\1\2{MASK}",
    ),
    # A bearer or basic credential anywhere.
    (re.compile(r"\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE), rf"\1 {MASK}"),
    # Keys by their providers' prefixes: OpenAI and Anthropic (sk-), GitHub, Slack, Google, Hugging Face, AWS.
    (re.compile(r"\b(sk-|rk-|ghp_|gho_|ghs_|github_pat_|xox[abprs]-|AIza|hf_|AKIA)[A-Za-z0-9_-]{8,}"), rf"\1{MASK}"),
    # A key or token passed as a parameter: `api_key=x`, `?token=x`.
    (re.compile(r"\b((?:api[_-]?key|access[_-]?token|token|secret|password)=)[^\s&\"']+", re.IGNORECASE), rf"\1{MASK}"),
    # A URL's password: scheme://user:password@host.
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s/:@]*:)[^\s/@]+(?=@)", re.IGNORECASE), rf"\1{MASK}"),
]


# Every pattern above needs one of these, in lower case: a text without any holds
# no credential, and looking for them is a fraction of the patterns' cost.
_HINTS = (
    "authorization",
    "api-key",
    "bearer",
    "basic",
    "sk-",
    "rk-",
    "ghp_",
    "gho_",
    "ghs_",
    "github_pat_",
    "xox",
    "aiza",
    "hf_",
    "akia",
    "key=",
    "token=",
    "secret=",
    "password=",
    "://",
)


def suspect(text: str) -> bool:
    """Whether ``text`` may hold a credential ``redact`` masks (False: it holds none)."""
    low = text.lower()
    return any(hint in low for hint in _HINTS)


def redact(text: str) -> str:
    """``text`` with every credential it seems to hold replaced by ``***``."""
    if not suspect(text):
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class Redacting(logging.Filter):
    """Redacts a record's message and traceback before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True
