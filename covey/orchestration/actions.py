"""What a strategy asks the worker to do next, and what the worker hands back.

Strategies are pure state machines over JSON-able state: ``start(ctx)`` and
``resume(ctx, state, outcome)`` both return an Action carrying the new state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from covey.results import AgentResult, Status


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model sent it


@dataclass(frozen=True)
class ChildRequest:
    task: str
    role: str = "agent"
    instructions: str = ""
    tools: list[str] | None = None


# --- Actions -----------------------------------------------------------------


@dataclass(frozen=True)
class CallModel:
    state: dict[str, Any]
    messages: list[dict[str, Any]]


@dataclass(frozen=True)
class RunTools:
    state: dict[str, Any]
    calls: list[ToolCall]


@dataclass(frozen=True)
class Spawn:
    state: dict[str, Any]
    children: list[ChildRequest]


@dataclass(frozen=True)
class Finish:
    state: dict[str, Any]
    status: Status
    output: str | None = None
    error: str | None = None


Action = Union[CallModel, RunTools, Spawn, Finish]


# --- Outcomes ----------------------------------------------------------------


@dataclass(frozen=True)
class ModelReply:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"


@dataclass(frozen=True)
class ToolResults:
    results: dict[str, str]  # tool call id -> text the model sees


@dataclass(frozen=True)
class ChildResults:
    results: list[AgentResult]


Outcome = Union[ModelReply, ToolResults, ChildResults]
