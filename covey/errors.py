"""``CoveyError``: the one base of every error covey raises on purpose, and ``StateLost``.

Each error also keeps its builtin base (``ValueError``, ``LookupError``, ...), so
``except CoveyError`` catches covey's own and ``except ValueError`` goes on working.
"""

from __future__ import annotations

from pydantic import ValidationError


class CoveyError(Exception):
    """An error covey raises on purpose, with one clear line; never a bug's traceback."""


class StateLost(CoveyError, LookupError):
    """Records a step needs are gone from Redis (wiped, or expired): the agent ends
    ``failed`` with cause ``state_lost``, and nothing it would have written to them
    is written, so no record comes back without its TTL."""


def describe(error: ValidationError, prefix: str = "") -> str:
    """One readable line naming each bad field: ``budget.max_tokens: Input should be ...``."""
    lines = []
    for item in error.errors():
        # A field name from the wire may hold a newline: quoted, the error stays one line.
        where = ".".join(str(p) if str(p).isprintable() else repr(p) for p in (prefix, *item["loc"]) if p != "")
        message = " ".join(item["msg"].removeprefix("Value error, ").splitlines())
        lines.append(message if not where else f"{where}: {message}")
    return "; ".join(lines)
