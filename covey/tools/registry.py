"""Tools by name: which exist, which an agent is offered, and their schemas for a call."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any, overload

from covey.tools.builtin import SPAWN_TOOLS, TOOL_SCHEMAS


def names() -> list[str]:
    """Every tool's name, in the order a call offers them."""
    return list(TOOL_SCHEMAS)


def schema(name: str) -> dict[str, Any]:
    """The function schema of tool ``name`` (``KeyError`` for an unknown one)."""
    return TOOL_SCHEMAS[name]


def check_known(tools: Iterable[str]) -> None:
    """``ValueError`` naming every unknown tool among ``tools`` and listing the known ones."""
    unknown = [name for name in tools if name not in TOOL_SCHEMAS]
    if unknown:
        raise ValueError(f"unknown tools {unknown}; known: {', '.join(TOOL_SCHEMAS)}")


@overload
def narrow(tools: list[str], allow: list[str] | None) -> list[str]: ...
@overload
def narrow(tools: list[str] | None, allow: list[str] | None) -> list[str] | None: ...
def narrow(tools: list[str] | None, allow: list[str] | None) -> list[str] | None:
    """The ``tools`` that ``allow`` lets through, in their order. None, on either
    side, means every tool: only where both are None is the answer None."""
    if allow is None:
        return tools
    if tools is None:
        return list(allow)
    return [name for name in tools if name in allow]


def offered(allow: list[str] | None, deny: list[str]) -> list[str]:
    """Tool names an agent sees: its allow list (all when unset) minus every deny rule."""
    return [name for name in narrow(names(), allow) if name not in deny]


def schemas(tools: list[str], agents_left: int | None) -> list[dict[str, Any]]:
    """The function schemas of ``tools`` for one call. The spawn tools say how many
    sub-agents this agent may still open (``agents_left``; None: no cap), so the
    model plans within the cap instead of learning it from refusals."""
    out = []
    for name in tools:
        found = schema(name)
        if name in SPAWN_TOOLS and agents_left is not None:
            found = copy.deepcopy(found)
            function = found["function"]
            function["description"] += f" This agent may open {agents_left} more sub-agent(s)."
            if name == "spawn_agents":
                function["parameters"]["properties"]["agents"]["maxItems"] = agents_left
        out.append(found)
    return out
