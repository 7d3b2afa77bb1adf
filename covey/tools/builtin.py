"""covey's built-in tools as OpenAI function schemas (pure data).

The worker implements them (``covey.worker.tools``); strategies read the control
tools (``spawn_agents``, ``delegate``, ``finish``) as Actions instead of running them.
"""

from __future__ import annotations

from typing import Any

SPAWN_TOOLS = frozenset({"spawn_agents", "delegate"})
FINISH_TOOL = "finish"

_CHILD: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "what the sub-agent must do"},
        "role": {"type": "string", "description": "a short role name"},
        "instructions": {"type": "string"},
        "tools": {"type": "array", "items": {"type": "string"}},
        "strategy": {"type": "string", "description": "how the sub-agent works (default: as this agent)"},
    },
    "required": ["task"],
}


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            # No other fields: a call is checked against this before it runs (covey.tools.arguments).
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "spawn_agents": _fn(
        "spawn_agents",
        "Run several sub-agents in parallel; returns each one's status and output.",
        {"agents": {"type": "array", "items": _CHILD}},
        ["agents"],
    ),
    "delegate": _fn(
        "delegate",
        "Hand one task to a sub-agent and get its status and output back.",
        _CHILD["properties"],
        ["task"],
    ),
    "finish": _fn("finish", "End this agent's run with a final answer.", {"answer": {"type": "string"}}, ["answer"]),
    "calculator": _fn(
        "calculator",
        "Evaluate an arithmetic expression with + - * / // % ** and parentheses.",
        {"expression": {"type": "string"}},
        ["expression"],
    ),
    "read_file": _fn("read_file", "Read a file of the job's shared workspace.", {"path": {"type": "string"}}, ["path"]),
    "write_file": _fn(
        "write_file",
        "Write a file under this agent's own workspace folder.",
        {"path": {"type": "string"}, "content": {"type": "string"}},
        ["path", "content"],
    ),
}

# Tools the worker runs itself (covey.worker.tools); control tools are an agent's Actions.
WORKER_TOOLS = frozenset(name for name in TOOL_SCHEMAS if name not in SPAWN_TOOLS and name != FINISH_TOOL)
