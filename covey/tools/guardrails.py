"""Guardrails: checks a job names that the worker runs on what its agents take in and
give out, each able to stop an agent (its tripwire).

``@guardrail(on=...)`` makes a function one, checking:

- ``"input"``: a job's task, before its root agent's first call: ``fn(text) -> reason | None``;
- ``"output"``: an agent's answer, before it ends ``completed``: ``fn(text) -> reason | None``;
- ``"tool_call"``: a tool call's arguments, before it runs: ``fn(tool, arguments) -> reason | None``;
- ``"tool_result"``: a tool call's result, before the model reads it: ``fn(tool, result) -> reason | None``.

A reason (any text) trips the wire: the agent ends ``failed`` with cause
``guardrail`` naming the guardrail and its reason; a tool guardrail made with
``tell_model=True`` hands the reason to the model as the call's result instead.
A check that raises trips too (a check that cannot run cannot pass). Guardrails
are served as tools are, from the ``covey.guardrails`` entry points and the
modules ``COVEY_TOOLS`` names, published in the workers' catalog, and a spec
naming one no worker serves is refused.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from covey.errors import CoveyError
from covey.tools.tool import NAME

Where = Literal["input", "output", "tool_call", "tool_result"]
WHERE: tuple[Where, ...] = ("input", "output", "tool_call", "tool_result")
ENTRY_POINT_GROUP = "covey.guardrails"
MAX_REASON_CHARS = 1000

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Guardrail:
    name: str
    on: Where
    check: Callable[..., str | None]
    origin: str  # "function pkg.mod:fn"
    description: str = ""
    tell_model: bool = False  # a tool guardrail's reason goes to the model as the call's result

    def tripped(self, *args: Any) -> str | None:
        """The reason this check stops what it checks, or None when it passes."""
        try:
            reason = self.check(*args)
        except Exception as e:
            log.exception("guardrail %s failed: it trips", self.name)
            return f"the check failed: {type(e).__name__}: {e}"[:MAX_REASON_CHARS]
        if reason is None or reason is False:
            return None
        return (str(reason) or "tripped")[:MAX_REASON_CHARS]


class GuardrailsError(CoveyError, ValueError):
    """A guardrail that cannot be served: a bad name, a clash."""


def guardrail(
    fn: Callable[..., str | None] | None = None,
    /,
    *,
    on: Where,
    name: str | None = None,
    tell_model: bool = False,
) -> Any:
    """Make ``fn`` a guardrail checking ``on`` (see the module); ``@guardrail(on="output")``."""
    if on not in WHERE:
        raise TypeError(f"guardrail on={on!r}: expected one of {', '.join(WHERE)}")
    if tell_model and on not in ("tool_call", "tool_result"):
        raise TypeError("tell_model=True is for tool guardrails: an input or an answer has no call to answer")

    def wrap(f: Callable[..., str | None]) -> Guardrail:
        given = name or f.__name__
        origin = f"function {f.__module__}:{f.__qualname__}"
        if not NAME.match(given):
            raise TypeError(f"{origin}: guardrail name {given!r} must match {NAME.pattern}")
        summary = (inspect.getdoc(f) or "").split("\n\n", 1)[0].replace("\n", " ")
        return Guardrail(given, on, f, origin, summary, tell_model)

    return wrap(fn) if fn is not None else wrap


_served: dict[str, Guardrail] = {}


def add(found: Iterable[Guardrail]) -> None:
    """Serve ``found``; ``GuardrailsError`` (and none added) for a name another one has."""
    given = list(found)
    for g in given:
        other = _served.get(g.name)
        if other is not None and other.origin != g.origin:
            raise GuardrailsError(f"guardrail {g.name!r} of {g.origin} clashes with the one of {other.origin}")
    _served.update((g.name, g) for g in given)


def served() -> list[Guardrail]:
    return list(_served.values())


def of(names: Iterable[str], on: Where) -> list[Guardrail]:
    """The guardrails among ``names`` that check ``on``, in their order (those not
    served are left out: the spec was checked against them)."""
    return [g for name in names if (g := _served.get(name)) is not None and g.on == on]


def missing(names: Iterable[str]) -> list[str]:
    """The names among ``names`` this process serves no guardrail by."""
    return [name for name in dict.fromkeys(names) if name not in _served]


def found_in(value: Any) -> list[Guardrail]:
    """The guardrails a module, a list or a guardrail holds."""
    if isinstance(value, Guardrail):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, Guardrail)]
    if isinstance(value, ModuleType):
        return [v for k, v in vars(value).items() if isinstance(v, Guardrail) and not k.startswith("_")]
    return []
