"""Tools a test worker serves through ``COVEY_TOOLS=tests.integration.file_tools``:
one returns an image, one reads a workspace file and returns another."""

from __future__ import annotations

from covey import File, Image, ToolContext, tool
from tests.images import png


@tool
def chart(label: str) -> Image:
    """Draw a chart of a series.

    Args:
        label: the series to draw
    """
    return Image(data=png(4 + len(label), 3))


@tool
def shout(path: str, ctx: ToolContext) -> File:
    """Write an upper-case copy of a workspace file to shouted.txt.

    Args:
        path: the file to copy
    """
    return File("shouted.txt", ctx.workspace.read(path).upper())
