"""What the model reads of an MCP tool's result.

The content blocks are what the server wrote for a reader, so they win: a tool
that returns a string reads as that string, not as the ``{"result": ...}`` the SDK
wraps it in as structured content. The spec has servers repeat structured content
as text, and reading both would say it twice; structured content is read, as
compact JSON, only when no block carries text. An image block is kept in the
workspace and named on an image line (``covey.parts.IMAGE_LINE``), so the agent's
next model call shows it, as a function tool's ``Image``; a block the model cannot
read as text (audio, a binary resource, an image covey does not show) is named
instead of pasted as base64.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import mcp_types as types

from covey import parts

Keep = Callable[[int, str, bytes], str]  # the n-th block's image type and bytes -> the workspace path it is kept at


def text(result: types.CallToolResult, keep: Keep | None = None) -> str:
    """The result as the text a model reads (an error result's too); with ``keep``,
    its first ``parts.MAX_PARTS`` images that are a PNG, JPEG, GIF or WebP of at
    most ``parts.MAX_BYTES`` are kept (as many as a task may carry)."""
    readable = any(isinstance(block, types.TextContent | types.EmbeddedResource) for block in result.content)
    if result.structured_content is not None and not result.is_error and not readable:
        return json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
    lines: list[str] = []
    shown = 0
    for n, block in enumerate(result.content):
        line = _kept(block, n, keep) if keep is not None and shown < parts.MAX_PARTS else None
        shown += line is not None
        lines.append(_block(block) if line is None else line)
    return "\n".join(lines)


def _kept(block: types.ContentBlock, n: int, keep: Keep) -> str | None:
    """The image line of an image block, kept; None for any other block or an image covey does not show."""
    if not isinstance(block, types.ImageContent):
        return None
    try:
        kind, data = parts.image_bytes(block.data)
    except parts.BadPart:
        return None
    return parts.IMAGE_LINE.format(keep(n, kind, data))


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
