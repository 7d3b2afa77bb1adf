"""Strategies by name. A strategy is a module with ``start`` and ``resume``."""

from __future__ import annotations

from types import ModuleType

from covey.orchestration import react

STRATEGIES: dict[str, ModuleType] = {react.NAME: react}
STRATEGY_NAMES = tuple(STRATEGIES)


def strategy(name: str) -> ModuleType:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise KeyError(f"unknown strategy {name!r}") from None
