"""pydantic-ai agents the tests run on covey: ``counted`` writes a line to a file at each run of its tool."""

from __future__ import annotations

from pathlib import Path

from pydantic_ai import Agent

counted = Agent(instructions="Count with the tally tool.")


@counted.tool_plain
def tally(path: str) -> str:
    """Count one run in the file at ``path``; answer how many runs it holds."""
    with open(path, "a") as f:
        f.write("run\n")
    return f"tallied {len(Path(path).read_text().splitlines())}"
