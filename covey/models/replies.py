"""What a model call hands back: the reply and the tool calls in it.

They live with the client that builds them, so talking to a model needs nothing
of the strategies that read its replies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model sent it


@dataclass(frozen=True)
class ModelReply:
    """What the model said and why it stopped; ``parsed`` is the JSON answer of
    a call that asked for a schema; ``offered``, set when the reply calls a tool
    the call did not offer, the names it did (the strategy tells the model so);
    ``model``, set when a fallback answered for the model asked, its name."""

    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    parsed: Any = None
    offered: tuple[str, ...] | None = None
    model: str | None = None
