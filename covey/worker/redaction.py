"""Secrets out of what people read: results, trees, transcripts, log lines, ``covey models``.

A provider's error may echo the request's ``Authorization`` header, an SDK's
message may quote a key, a URL may carry a password, a model may repeat a key a
tool gave it. ``redact`` replaces each with ``***`` before the text becomes an
agent's output or error, a transcript entry or a log line, keeping the rest
readable (the header's name, the key's prefix, the URL's user and host).

Two kinds of match: the secrets this worker holds (``hold``: its keys, its
signing secret, its MCP servers' headers), found however an echo split them
(a wrapped line, two quoted halves, JSON's ``\\n``) and whatever their case; and
patterns for credentials it does not hold (a provider's key prefixes, headers,
URL passwords). Held secrets go first: a pattern that masked a key's first
line would leave the rest of it for no held secret to match.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

MASK = "***"
MIN_SECRET_CHARS = 8  # a shorter value is no secret worth masking everywhere ("none", "true")
# What an echo may put inside a secret: whitespace, quotes, a backslash, "+" between
# two quoted halves, and JSON's or repr's escapes of a line end or a tab.
_GAP_BYTES = b" \t\n\r\f\v\"'`+\\"
_ESCAPES = re.compile(rb"\\[nrt]")
_GAP = rf"""(?:\\[nrt]|[{re.escape(_GAP_BYTES.decode())}])*"""


def squeeze(text: str) -> bytes:
    """``text`` as the held secrets are looked for in it: its UTF-8 in lower case,
    without what an echo may put inside one (bytes: a pass over a 20 kB text
    takes tens of microseconds, where a pattern took half a millisecond)."""
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:
        data = _ESCAPES.sub(b"", data)
    return data.translate(None, _GAP_BYTES).lower()


class Secrets:
    """Values masked wherever they appear, however split by whitespace or quoting and whatever their case."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        squeezed = {squeeze(v) for v in values}
        kept = sorted((s for s in squeezed if len(s) >= MIN_SECRET_CHARS), key=len, reverse=True)
        self._squeezed = tuple(kept)
        alternatives = "|".join(_GAP.join(re.escape(c) for c in s.decode("utf-8", "surrogatepass")) for s in kept)
        self._pattern = re.compile(alternatives, re.IGNORECASE) if kept else None

    def found(self, text: str) -> bool:
        """Whether ``text`` holds one of them (one pass over it, no pattern)."""
        if not self._squeezed:
            return False
        seen = squeeze(text)
        return any(s in seen for s in self._squeezed)

    def mask(self, text: str) -> str:
        return self._pattern.sub(MASK, text) if self._pattern is not None and self.found(text) else text


_held = Secrets()


def hold(values: Iterable[str]) -> None:
    """The secrets this process holds, masked by every ``redact`` from now on."""
    global _held
    _held = Secrets(values)


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


def _hinted(text: str) -> bool:
    low = text.lower()
    return any(hint in low for hint in _HINTS)


def suspect(text: str) -> bool:
    """Whether ``text`` may hold a credential ``redact`` masks (False: it holds none)."""
    return _hinted(text) or _held.found(text)


def redact(text: str) -> str:
    """``text`` with every held secret and every credential it seems to hold replaced by ``***``."""
    text = _held.mask(text)
    if not _hinted(text):
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def clean(value: Any) -> Any:
    """``value`` (text, or JSON's lists and objects of it) with every text in it redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


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
