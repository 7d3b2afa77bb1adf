"""What the model reads of an MCP tool's result.

Structured content is the server's typed answer, so it wins, as compact JSON; the
spec has servers repeat it as text for older clients, and reading both would say
it twice. Otherwise the text blocks are joined, and a block the model cannot read
as text (an image, audio, a binary resource) is named instead of pasted as base64.
"""

from __future__ import annotations

import json

import mcp_types as types


def text(result: types.CallToolResult) -> str:
    """The result as the text a model reads (an error result's too)."""
    if result.structured_content is not None and not result.is_error:
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
