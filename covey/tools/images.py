"""A tool result's images, where a result holds several parts: an MCP server's
content blocks, an Agents SDK or pydantic-ai tool's structured output.

Each image is kept below the calling agent's folder, named by the call (a call
run again writes the same file), and named on an image line
(``covey.parts.IMAGE_LINE``) that the worker shows in the agent's next model
call (``covey.worker.attachments``), as it does a function tool's one ``Image``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from covey import parts
from covey.errors import describe
from covey.parts import BadPart, Image, ImageURL
from covey.tools.tool import ToolContext


def kept(context: ToolContext, n: int, kind: str, data: bytes) -> str:
    """The ``n``-th image of the call, written: the workspace path its image line names."""
    return context.workspace.write(parts.tool_image(context.call_id, kind, n), data)


def from_url(url: str) -> Image | str:
    """An image a tool gave by URL (a ``data:`` URL of its bytes, or an http(s) one);
    otherwise the line the model reads instead, saying why it is not shown."""
    try:
        if url.startswith("data:"):
            return Image(data=parts.image_bytes(url)[1])
        ImageURL(url=url)
    except BadPart as e:
        return f"[image not shown: {e}]"
    except ValidationError as e:
        return f"[image not shown: {describe(e)}]"
    return Image(url=url)


def text(pieces: Sequence[str | Image], context: ToolContext) -> str:
    """The result as the model reads it, a line a piece: text as it is, each image on
    its image line; past ``parts.MAX_PARTS`` images (as many as a task may carry), named."""
    lines: list[str] = []
    shown = 0
    for n, piece in enumerate(pieces):
        if isinstance(piece, str):
            lines.append(piece)
        elif shown == parts.MAX_PARTS:
            lines.append(f"[image not shown: a result shows at most {parts.MAX_PARTS}]")
        else:
            shown += 1
            data = piece.data
            where = piece.url if data is None else kept(context, n, parts.image_type(data) or "image/png", data)
            lines.append(parts.IMAGE_LINE.format(where))
    return "\n".join(lines)
