"""What the model reads of an MCP tool's result.

The content blocks are what the server wrote for a reader, so they win: a tool
that returns a string reads as that string, not as the ``{"result": ...}`` the SDK
wraps it in as structured content. The spec has servers repeat structured content
as text, and reading both would say it twice; structured content is read, as
compact JSON, only when no block carries text. A block the model cannot read as
text (an image, audio, a binary resource) is named instead of pasted as base64.
"""

from __future__ import annotations

import json

import mcp_types as types


def text(result: types.CallToolResult) -> str:
    """The result as the text a model reads (an error result's too)."""
    readable = any(isinstance(block, types.TextContent | types.EmbeddedResource) for block in result.content)
    if result.structured_content is not None and not result.is_error and not readable:
        return json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
    return "\n".join(_block(block) for block in result.content)


def _block(block: types.ContentBlock) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.EmbeddedResource):
        contents = block.resource
        if isinstance(contents, types.TextResourceContents):
            return contents.text
        return f"[binary resource {contents.uri} ({contents.mime_type or 'unknown type'})]"
    if isinstance(block, types.ResourceLink):
        return f"[resource {block.uri}]"
    return f"[{block.type} ({block.mime_type})]"
