"""The tools an agent of another framework brings, as covey serves them, and its sub-agents.

Looked up by the agent's path, once per process: the worker runs the tools'
calls through covey's tool policy by name (``covey.worker.tools``), and the
``agent`` strategy replays them and spawns the sub-agents.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from covey.agents import loading
from covey.agents.served import Brought


@lru_cache(maxsize=64)
def brought(path: str) -> Brought:
    """What the agent at ``path`` brings; ``AgentNotFound`` for one covey cannot run."""
    agent = loading.load(path)
    if loading.kind(agent) == loading.PYDANTIC_AI:
        from covey.agents import pydantic_tools

        return pydantic_tools.brought(path, agent)
    from covey.agents import sdk_tools

    return sdk_tools.brought(path, agent)


def agent_behind(path: str, tool: str) -> Any:
    """The agent the ``as_tool`` tool named ``tool`` runs, in the agent at ``path``."""
    found = brought(path).agents.get(tool)
    if found is None:
        raise loading.AgentNotFound(f"agent {path!r} has no as_tool agent named {tool!r}")
    return found
