"""``CoveyError``: the one base of every error covey raises on purpose.

Each error also keeps its builtin base (``ValueError``, ``LookupError``, ...), so
``except CoveyError`` catches covey's own and ``except ValueError`` goes on working.
"""

from __future__ import annotations


class CoveyError(Exception):
    """An error covey raises on purpose, with one clear line; never a bug's traceback."""
