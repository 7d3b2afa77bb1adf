"""The Agents SDK's model request as covey's chat call, and covey's reply as the SDK's response.

The SDK's own Chat Completions converter does both halves, so what covey sends is
what the SDK's ``OpenAIChatCompletionsModel`` would: the same messages, the same
function schemas for tools and handoffs, the same ``final_output`` schema.
"""

from __future__ import annotations

from typing import Any

from agents import FunctionTool, Handoff, ModelResponse, Usage
from agents.agent_output import AgentOutputSchemaBase
from agents.items import TResponseInputItem
from agents.models.chatcmpl_converter import Converter
from agents.tool import Tool
from agents.util._json import _to_dump_compatible
from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageFunctionToolCall
from openai.types.chat.chat_completion_message_function_tool_call import Function

from covey.agents.session import Request, digest


def request(
    system_instructions: str | None,
    input: str | list[TResponseInputItem],
    tools: list[Tool],
    output_schema: AgentOutputSchemaBase | None,
    handoffs: list[Handoff[Any, Any]],
    covey_runs: frozenset[int],
    covey_spawns: frozenset[int],
) -> Request:
    """The call, its functions (tools, then handoffs, as the SDK orders them) and
    its output schema; ``covey_runs`` holds the ids of the tool objects covey runs,
    ``covey_spawns`` those of the ``as_tool`` agents it runs as children."""
    messages: list[Any] = Converter.items_to_messages(input)
    if system_instructions:
        messages.insert(0, {"role": "system", "content": system_instructions})
    functions: list[Any] = [Converter.tool_to_openai(t) for t in tools]
    functions += [Converter.convert_handoff_tool(h) for h in handoffs]
    messages, functions = _to_dump_compatible(messages), _to_dump_compatible(functions)
    schema = None if output_schema is None or output_schema.is_plain_text() else output_schema.json_schema()
    runs = [t.name for t in tools if isinstance(t, FunctionTool) and id(t) in covey_runs]
    spawns = [t.name for t in tools if isinstance(t, FunctionTool) and id(t) in covey_spawns]
    return Request(messages, functions, schema, runs, spawns, digest(messages, functions, schema))


def response(reply: dict[str, Any]) -> ModelResponse:
    """The SDK's response to a call covey answered with ``reply`` (a ``ModelReply``'s
    fields). Its usage counts the request alone: covey's ledger holds the tokens."""
    calls: list[Any] = [
        ChatCompletionMessageFunctionToolCall(
            id=c["id"], type="function", function=Function(name=c["name"], arguments=c["arguments"])
        )
        for c in reply.get("tool_calls") or []
    ]
    message = ChatCompletionMessage(role="assistant", content=reply.get("content"), tool_calls=calls or None)
    items = Converter.message_to_output_items(message)
    return ModelResponse(output=items, usage=Usage(requests=1), response_id=None)
