"""``CoveyError``: the one base of every error covey raises on purpose, and ``StateLost``.

Each error also keeps its builtin base (``ValueError``, ``LookupError``, ...), so
``except CoveyError`` catches covey's own and ``except ValueError`` goes on working.
"""

from __future__ import annotations


class CoveyError(Exception):
    """An error covey raises on purpose, with one clear line; never a bug's traceback."""


class StateLost(CoveyError, LookupError):
    """Records a step needs are gone from Redis (wiped, or expired): the agent ends
    ``failed`` with cause ``state_lost``, and nothing it would have written to them
    is written, so no record comes back without its TTL."""
