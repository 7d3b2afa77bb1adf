"""An Agents SDK agent's function tools, run through covey's tool policy and replayed.

Every ``FunctionTool`` reachable from the agent (its tools, its handoffs' agents',
its ``as_tool`` agents') is served to covey as a ``covey.tools.Tool`` under its own
name: the worker runs its calls like any tool's (arguments checked, a timeout,
an output cap, approval where the spec or the tool asks for it, the result
recorded with the step), so a crash never runs one twice. Inside the SDK's run
its invocation is replaced, once per process, by one that answers from the run's
journal (``covey.agents.session``); outside a covey run it calls the tool as before.
The images of a structured output (``ToolOutputImage``) are kept in the workspace
and shown in the agent's next model call, as covey's own tools' images are.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

from agents import Agent, FunctionTool, Handoff
from agents.items import ItemHelpers
from agents.tool_context import ToolContext as SdkToolContext
from pydantic import BaseModel

from covey.agents import loops, session
from covey.agents.loading import AgentNotFound
from covey.agents.served import Brought
from covey.parts import Image
from covey.tools import images
from covey.tools.tool import DEFAULT_TIMEOUT, Tool, ToolContext

_MARK = "_covey_original"  # on a tool covey wrapped: its invocation before that
_wrapping = threading.Lock()


def brought(path: str, root: Agent[Any]) -> Brought:
    """The function tools of ``root`` (the agent at ``path``), wrapped for replay;
    ``AgentNotFound`` when two different tools share a name (covey runs a call by its name)."""
    found: dict[str, FunctionTool] = {}
    for tool in _function_tools(root):
        other = found.setdefault(tool.name, tool)
        if other is not tool:
            raise AgentNotFound(f"agent {path!r}: two different function tools are named {tool.name!r}")
    with _wrapping:
        for tool in found.values():
            if not hasattr(tool, _MARK):
                original = tool.on_invoke_tool
                setattr(tool, _MARK, original)
                tool.on_invoke_tool = _replayed(tool.name, original)
    run_here = {name: t for name, t in found.items() if not t._is_agent_tool}
    children = {name: t for name, t in found.items() if t._is_agent_tool and isinstance(t._agent_instance, Agent)}
    return Brought(
        {name: _served(t, path) for name, t in run_here.items()},
        frozenset(map(id, run_here.values())),
        {name: t._agent_instance for name, t in children.items()},
        frozenset(map(id, children.values())),
    )


def _function_tools(root: Agent[Any]) -> Iterator[FunctionTool]:
    """Every function tool of ``root`` and of the agents it hands off to or uses as tools."""
    seen: set[int] = set()
    todo: list[Any] = [root]
    while todo:
        agent = todo.pop()
        if id(agent) in seen or not isinstance(agent, Agent):
            continue
        seen.add(id(agent))
        for tool in agent.tools:
            if isinstance(tool, FunctionTool):
                yield tool
                if tool._is_agent_tool:
                    todo.append(tool._agent_instance)
        for target in agent.handoffs:
            todo.append(target._agent_ref() if isinstance(target, Handoff) and target._agent_ref else target)


def covey_tools(schemas: list[dict[str, Any]]) -> list[FunctionTool]:
    """covey's tools a job names (built-ins, a worker's functions, MCP servers' tools),
    as function tools the SDK offers beside the agent's own: covey runs a call through
    its tool path as the reply comes (``RunTools``), and the SDK reads its recorded result."""
    return [
        FunctionTool(
            name=f["name"],
            description=f.get("description") or "",
            params_json_schema=f.get("parameters") or {"type": "object", "properties": {}},
            on_invoke_tool=_replayed(f["name"], _outside(f["name"])),
            strict_json_schema=False,  # covey's schemas are not strict; covey checks the arguments
        )
        for f in (schema["function"] for schema in schemas)
    ]


def _outside(name: str) -> Any:
    async def invoke(context: SdkToolContext[Any], arguments: str) -> str:
        return f"error: covey's tool {name!r} runs only in a covey run"

    return invoke


def _replayed(name: str, original: Any) -> Any:
    async def invoke(context: SdkToolContext[Any], arguments: str) -> Any:
        journal = session.current.get()
        if journal is None:  # not a covey run: the tool as it was
            return await original(context, arguments)
        return await journal.tool_result(name, context.tool_call_id)

    return invoke


def _served(tool: FunctionTool, path: str) -> Tool:
    """The SDK tool as covey's: its own invocation (with the SDK's error handling,
    which hands the model a failure as text), run in the policy's thread."""
    original = getattr(tool, _MARK)

    def run(args: dict[str, Any], ctx: ToolContext) -> str:
        given = json.dumps(args)
        context = SdkToolContext(context=None, tool_name=tool.name, tool_call_id=ctx.call_id, tool_arguments=given)
        return _read(loops.run(lambda: original(context, given)), ctx)

    needs = tool.needs_approval
    return Tool(
        name=tool.name,
        origin=f"agent {path}",
        description=tool.description or "",
        parameters=tool.params_json_schema,
        run=run,
        timeout=tool.timeout_seconds or DEFAULT_TIMEOUT,
        needs_approval=needs if isinstance(needs, bool) else True,  # a predicate of the SDK's: a person decides
    )


def _read(output: Any, ctx: ToolContext) -> str:
    """What the model reads of a tool's output: a structured one (``ToolOutputText``,
    ``ToolOutputImage``, ``ToolOutputFileContent``, one or a list, or their dicts, as
    the SDK reads them) a line a part, its images kept and shown in the next call."""
    structured = None if isinstance(output, str) else ItemHelpers._convert_tool_output_as_structured(output)
    if structured is None:
        return _text(output)
    return images.text([_part(dict(item)) for item in structured], ctx)


def _part(item: dict[str, Any]) -> str | Image:
    """Text, an image given by URL, or what the model reads of another part (an
    image or file given by an OpenAI file id, a file's data): its name."""
    if item["type"] == "input_text":
        return item["text"]
    if item["type"] == "input_image" and item.get("image_url"):
        return images.from_url(item["image_url"])
    kind = item["type"].removeprefix("input_")
    name = item.get("filename") or item.get("file_url") or item.get("file_id")
    return f"[{kind} {name}]" if name else f"[{kind}]"


def _text(output: Any) -> str:
    """What the model reads of a tool's other output, as the SDK would send it."""
    if isinstance(output, str):
        return output
    if isinstance(output, BaseModel):
        return output.model_dump_json()
    if isinstance(output, dict | list):
        return json.dumps(output, default=str)
    return str(output)
