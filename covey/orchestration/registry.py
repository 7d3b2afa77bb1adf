"""Strategies by name. A strategy is a module with ``start`` and ``resume``."""

from __future__ import annotations

from types import ModuleType

STRATEGY_NAMES = ("react",)
STRATEGIES = frozenset(STRATEGY_NAMES)


def strategy(name: str) -> ModuleType:
    """The strategy module for ``name`` (imported late: spec validation needs only names)."""
    if name not in STRATEGIES:
        raise KeyError(f"unknown strategy {name!r}")
    from covey.orchestration import react

    return {"react": react}[name]
