"""What an agent of another framework brings with it, as covey serves it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from covey.tools.tool import Tool


@dataclass(frozen=True)
class Brought:
    """The agent's function tools as covey serves them, by name, and the ids of the
    objects behind them (whose calls covey runs); its ``as_tool`` agents by tool
    name, and their tools' ids (each call a covey child)."""

    tools: dict[str, Tool]
    ids: frozenset[int]
    agents: dict[str, Any]
    agent_ids: frozenset[int]
