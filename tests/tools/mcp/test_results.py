"""What the model reads of an MCP result's image blocks: kept (as many as a task may
carry), or named when covey does not show them."""

from __future__ import annotations

import base64

import mcp_types as types

from covey import parts
from covey.tools.mcp.results import text
from tests.images import png


def image(data: bytes, mime_type: str = "image/png") -> types.ImageContent:
    return types.ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=mime_type)


def test_the_first_images_a_task_may_carry_are_kept_and_the_rest_and_non_images_named():
    svg = image(b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml")
    blocks = [svg, *(image(png(i + 1, 1)) for i in range(parts.MAX_PARTS + 1))]
    kept: list[tuple[int, str, bytes]] = []

    def keep(n: int, kind: str, data: bytes) -> str:
        kept.append((n, kind, data))
        return f"images/call-{n}.png"

    said = text(types.CallToolResult(content=blocks), keep).split("\n")
    assert said[0] == "[image (image/svg+xml)]"  # no PNG, JPEG, GIF or WebP: named
    assert said[1 : parts.MAX_PARTS + 1] == [f"[image: images/call-{n}.png]" for n in range(1, parts.MAX_PARTS + 1)]
    assert said[-1] == "[image (image/png)]"  # past the MAX_PARTS images kept
    assert [(n, kind) for n, kind, _ in kept] == [(n, "image/png") for n in range(1, parts.MAX_PARTS + 1)]
    assert kept[0][2] == png(1, 1)


def test_without_a_workspace_to_keep_them_images_are_named():
    assert text(types.CallToolResult(content=[image(png(2, 2))])) == "[image (image/png)]"
