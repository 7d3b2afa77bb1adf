"""A pydantic-ai agent's function tools, run through covey's tool policy and replayed.

The tools of its function toolset (``@agent.tool``, ``@agent.tool_plain``,
``tools=[...]``) are served to covey under their names: the worker runs their
calls like any tool's (arguments checked, a timeout, an output cap, approval,
the result recorded). Inside pydantic-ai's run the toolset's ``call_tool`` is
replaced, once per process, by one that answers from the run's journal; outside
a covey run it calls the tool as before. A tool runs with no ``deps`` (covey
carries none) and a run context of its own. The images it returns
(``BinaryContent``, ``ImageUrl``) are kept in the workspace and shown in the
agent's next model call, as covey's own tools' images are.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai import Tool as PaiTool
from pydantic_ai.messages import BinaryContent, FileUrl, ImageUrl, ToolReturn, UploadedFile
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage

from covey.agents import loops, session
from covey.agents.served import Brought
from covey.parts import BadPart, Image
from covey.tools import images
from covey.tools.tool import DEFAULT_TIMEOUT, Tool, ToolContext

_MARK = "_covey_original"  # on a toolset covey wrapped: its call_tool before that
_wrapping = threading.Lock()


def names(agent: Agent[Any, Any]) -> frozenset[str]:
    """The names of the function tools covey runs for ``agent``."""
    return frozenset(agent._function_toolset.tools)


def brought(path: str, agent: Agent[Any, Any]) -> Brought:
    """The agent's function tools as covey serves them, its toolset wrapped for replay."""
    toolset = agent._function_toolset
    with _wrapping:
        if not hasattr(toolset, _MARK):
            original = toolset.call_tool
            setattr(toolset, _MARK, original)

            async def call_tool(name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: Any) -> Any:
                journal = session.current.get()
                if journal is None:  # not a covey run: the tool as it was
                    return await original(name, tool_args, ctx, tool)
                return await journal.tool_result(name, ctx.tool_call_id or "")

            toolset.call_tool = call_tool  # type: ignore[method-assign]
    served = {name: _served(agent, name, path) for name in toolset.tools}
    return Brought(served, frozenset(), {}, frozenset())


def covey_tools(schemas: list[dict[str, Any]]) -> FunctionToolset[Any]:
    """covey's tools a job names, as a toolset of the run's beside the agent's own:
    covey runs a call through its tool path as the reply comes, and the run reads
    its recorded result from the journal."""
    return FunctionToolset(
        [
            PaiTool.from_schema(
                _recorded(f["name"]), f["name"], f.get("description"), f.get("parameters"), takes_ctx=True
            )
            for f in (schema["function"] for schema in schemas)
        ]
    )


def _recorded(name: str) -> Any:
    async def answer(ctx: RunContext[Any], **_: Any) -> str:
        journal = session.current.get()
        if journal is None:
            return f"error: covey's tool {name!r} runs only in a covey run"
        return await journal.tool_result(name, ctx.tool_call_id or "")

    return answer


def _served(agent: Agent[Any, Any], name: str, path: str) -> Tool:
    toolset = agent._function_toolset
    tool = toolset.tools[name]
    definition = tool.tool_def

    def run(args: dict[str, Any], ctx: ToolContext) -> str:
        async def called() -> Any:
            context = RunContext(
                deps=None, model=TestModel(), usage=RunUsage(), tool_call_id=ctx.call_id, tool_name=name
            )
            found = (await toolset.get_tools(context))[name]
            return await getattr(toolset, _MARK)(name, args, context, found)

        return _read(loops.run(called), ctx)

    return Tool(
        name=name,
        origin=f"agent {path}",
        description=definition.description or "",
        parameters=definition.parameters_json_schema,
        run=run,
        timeout=tool.timeout or DEFAULT_TIMEOUT,
    )


def _read(output: Any, ctx: ToolContext) -> str:
    """What the model reads of a tool's output: multimodal content (``BinaryContent``,
    ``ImageUrl``, one or a list with text) a line a part, its images kept and shown
    in the next call; a ``ToolReturn``'s value, then its content for the model (its
    metadata is the application's); anything else as text or JSON."""
    if not isinstance(output, ToolReturn):
        return images.text(_parts(output), ctx)
    content = output.content
    more = [] if content is None else [content] if isinstance(content, str) else list(content)
    return images.text([*_parts(output.return_value), *map(_part, more)], ctx)


def _parts(value: Any) -> list[str | Image]:
    given = value if isinstance(value, list) else [value]
    if any(isinstance(item, FileUrl | BinaryContent | UploadedFile) for item in given):
        return [_part(item) for item in given]
    return [_text(value)]


def _part(item: Any) -> str | Image:
    """Text, an image, or what the model reads of another file (a document, audio, a
    provider's upload): its kind and where it is."""
    if isinstance(item, BinaryContent) and item.is_image:
        try:
            return Image(data=item.data)
        except BadPart as e:
            return f"[image not shown: {e}]"
    if isinstance(item, ImageUrl):
        return images.from_url(item.url)
    if isinstance(item, FileUrl):
        return f"[{getattr(item, 'kind', 'file')} {item.url}]"
    if isinstance(item, BinaryContent):
        return f"[{item.kind} {item.media_type}, {len(item.data)} bytes]"
    if isinstance(item, UploadedFile):
        return f"[{item.kind} {item.file_id}]"
    return _text(item)


def _text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, BaseModel):
        return output.model_dump_json()
    return json.dumps(output, default=str)
