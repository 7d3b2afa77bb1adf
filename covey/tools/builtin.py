"""covey's built-in tools, as ``Tool`` records like any other.

The control tools (``spawn_agents``, ``delegate``, ``finish``) are offered like
the rest but never run: strategies read a call to one as an Action. The others
work on the job's workspace through the call's ``ToolContext``.
"""

from __future__ import annotations

from typing import Any

from covey.tools.calculator import calculate
from covey.tools.tool import Tool, ToolContext

ORIGIN = "builtin"
SPAWN_TOOLS = frozenset({"spawn_agents", "delegate"})
FINISH_TOOL = "finish"
CONTROL_TOOLS = SPAWN_TOOLS | {FINISH_TOOL}
MAX_CHILD_SECONDS = 7 * 24 * 3600  # a sub-agent's timeout, as a spec's: at most a week

_CHILD: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "what the sub-agent must do"},
        "role": {"type": "string", "description": "a short role name"},
        "instructions": {"type": "string"},
        "tools": {"type": "array", "items": {"type": "string"}},
        "strategy": {"type": "string", "description": "how the sub-agent works (default: as this agent)"},
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": MAX_CHILD_SECONDS,
            "description": "seconds the sub-agent may run, after which it stops as timed_out "
            "(this agent's own deadline holds too)",
        },
    },
    "required": ["task"],
}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    # No other fields: a call is checked against this before it runs (covey.tools.arguments).
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _control(args: dict[str, Any], ctx: ToolContext) -> str:
    raise RuntimeError("a control tool is the strategy's Action, never run as a tool")


def _edit(args: dict[str, Any], ctx: ToolContext) -> str:
    path, old, new = args["path"], args["old"], args["new"]
    if not old:
        raise ValueError("old is empty: name the text to replace")
    text = ctx.workspace.read(ctx.workspace.own(path))
    found = text.count(old)
    if found != 1:
        raise ValueError(f"old occurs {found} times in {path}: it must occur exactly once")
    return f"edited {ctx.workspace.write(path, text.replace(old, new, 1))}"


def _listed(args: dict[str, Any], ctx: ToolContext) -> str:
    return "\n".join(ctx.workspace.list(args["prefix"])) or "no files"


def _builtin(name: str, description: str, parameters: dict[str, Any], run: Any, writes: bool = False) -> Tool:
    return Tool(name=name, origin=ORIGIN, description=description, parameters=parameters, run=run, writes=writes)


_STRING = {"type": "string"}

TOOLS: tuple[Tool, ...] = (
    _builtin(
        "spawn_agents",
        "Run several sub-agents in parallel; returns each one's status and output.",
        _object({"agents": {"type": "array", "items": _CHILD}}, ["agents"]),
        _control,
    ),
    _builtin(
        "delegate",
        "Hand one task to a sub-agent and get its status and output back.",
        _object(_CHILD["properties"], ["task"]),
        _control,
    ),
    _builtin("finish", "End this agent's run with a final answer.", _object({"answer": _STRING}, ["answer"]), _control),
    _builtin(
        "calculator",
        "Evaluate an arithmetic expression with + - * / // % ** and parentheses.",
        _object({"expression": _STRING}, ["expression"]),
        lambda args, ctx: calculate(args["expression"]),
    ),
    _builtin(
        "read_file",
        "Read a file of the job's shared workspace.",
        _object({"path": _STRING}, ["path"]),
        lambda args, ctx: ctx.workspace.read(args["path"]),
    ),
    _builtin(
        "write_file",
        "Write a file under this agent's own workspace folder.",
        _object({"path": _STRING, "content": _STRING}, ["path", "content"]),
        lambda args, ctx: f"wrote {ctx.workspace.write(args['path'], args['content'])}",
        writes=True,
    ),
    _builtin(
        "list_files",
        "List the files of the job's shared workspace whose path starts with prefix ('' for all).",
        _object({"prefix": _STRING}, ["prefix"]),
        _listed,
    ),
    _builtin(
        "edit_file",
        "Replace the one occurrence of old with new in a file under this agent's own workspace folder.",
        _object({"path": _STRING, "old": _STRING, "new": _STRING}, ["path", "old", "new"]),
        _edit,
        writes=True,
    ),
)
