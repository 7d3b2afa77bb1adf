"""pydantic-ai agents the tests run on covey: ``counted`` writes a line to a file at
each run of its tool; ``plotting``'s tool returns text, images and a document."""

from __future__ import annotations

from pathlib import Path

from pydantic_ai import Agent, BinaryContent, DocumentUrl, ImageUrl, ToolReturn

from tests.images import png

counted = Agent(instructions="Count with the tally tool.")


@counted.tool_plain
def tally(path: str) -> str:
    """Count one run in the file at ``path``; answer how many runs it holds."""
    with open(path, "a") as f:
        f.write("run\n")
    return f"tallied {len(Path(path).read_text().splitlines())}"


plotting = Agent(instructions="Plot what is asked.")


@plotting.tool_plain
def plot(
    label: str, copies: int = 1, returned: bool = False
) -> list[str | BinaryContent | ImageUrl | DocumentUrl] | ToolReturn:
    """Plot a series: a caption, the plot (``copies`` times), one on the web, and its
    source; ``returned``: the caption as the value, the plot for the model, a secret kept."""
    drawn = [BinaryContent(png(4 + len(label), 3), media_type="image/png")] * copies
    if returned:
        return ToolReturn(f"plot of {label}", content=["The plot:", *drawn], metadata={"secret": "s3cret"})
    return [
        f"plot of {label}",
        *drawn,
        ImageUrl("https://example.com/plot.png"),
        DocumentUrl("https://example.com/data.pdf"),
    ]
