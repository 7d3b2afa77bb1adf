"""Strategies by name: covey's own and any registered by another package.

A strategy is an object (usually a module) with ``NAME``, ``Options`` (a pydantic
model of its options, validated with the spec), ``State`` (the pydantic model of
its state, usually a ``covey.orchestration.states.StrategyState`` with a phase:
the worker loads a checkpoint with it) and the two pure functions
``start(spec, ctx)`` and ``resume(spec, ctx, state, outcome)`` returning Actions
that carry a ``State``. Another package registers one under the
``covey.strategies`` entry point group::

    [options.entry_points]
    covey.strategies =
        beam = mypkg.beam          # a module, or any object with the same five names

Nothing is imported until a name is looked up, so the spec can depend on this
module by name alone.
"""

from __future__ import annotations

import importlib
from functools import cache, lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel

from covey.errors import CoveyError

if TYPE_CHECKING:
    from covey.context import RunContext
    from covey.orchestration.actions import Action, Outcome
    from covey.spec import AgentSpec

ENTRY_POINT_GROUP = "covey.strategies"

_BUILTIN = {
    "react": "covey.orchestration.react",
    "single": "covey.orchestration.single",
    "plan_execute": "covey.orchestration.plan_execute",
    "debate": "covey.orchestration.debate",
    "lats": "covey.orchestration.lats",
    "orchestrate": "covey.orchestration.orchestrate",
    "agent": "covey.agents.strategy",  # an Agents SDK or pydantic-ai agent (``AgentSpec.agent``)
}


StateT = TypeVar("StateT", bound=BaseModel)


class Strategy(Protocol[StateT]):
    NAME: str
    Options: type[BaseModel]
    State: type[StateT]

    def start(self, spec: AgentSpec, ctx: RunContext) -> Action: ...

    def resume(self, spec: AgentSpec, ctx: RunContext, state: StateT, outcome: Outcome) -> Action: ...


class UnknownStrategy(CoveyError, LookupError):
    """No strategy of that name; the message lists the known ones."""


@lru_cache(maxsize=1)
def _plugins() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in _BUILTIN}


def names() -> list[str]:
    return sorted({*_BUILTIN, *_plugins()})


@cache
def strategy(name: str) -> Strategy[Any]:
    if name in _BUILTIN:
        return importlib.import_module(_BUILTIN[name])
    plugin = _plugins().get(name)
    if plugin is None:
        raise UnknownStrategy(f"unknown strategy {name!r}; known: {', '.join(names())}")
    loaded = plugin.load()
    missing = [attr for attr in ("NAME", "Options", "start", "resume", "State") if not hasattr(loaded, attr)]
    if missing:
        raise UnknownStrategy(f"strategy {name!r} ({plugin.value}) lacks {', '.join(missing)}")
    return loaded
