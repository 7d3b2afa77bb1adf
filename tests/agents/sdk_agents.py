"""Agents SDK agents the integration tests run on covey workers (importable from the repo root).

``counted`` writes a line to a file for every run of its tool, so a test counts the
runs across worker processes; ``drifting`` reads its instructions from a file at
every run, so a test changes what a replay asks for; ``meeting``'s ``as_tool``
agent waits for a sibling begun in another process, so two parallel calls of it
end only where each ran on a worker process of its own; ``plotting``'s tool
returns the SDK's structured output: text, images and a file.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from agents import Agent, RunContextWrapper, ToolOutputFileContent, ToolOutputImage, ToolOutputText, function_tool

from covey.parts import data_url
from tests.images import png


@function_tool
def tally(path: str) -> str:
    """Count one run in the file at ``path``; answer how many runs it holds."""
    with open(path, "a") as f:
        f.write("run\n")
    return f"tallied {len(Path(path).read_text().splitlines())}"


counted = Agent(name="counted", instructions="Count with the tally tool.", tools=[tally])


def _instructions(context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
    return Path(DRIFT_FILE).read_text() if Path(DRIFT_FILE).exists() else "Count with the tally tool."


DRIFT_FILE = os.environ.get("SDK_AGENTS_DRIFT", "/nonexistent")  # the file a test changes between runs
drifting = Agent(name="drifting", instructions=_instructions, tools=[tally])

MEET_FILE = os.environ.get("SDK_AGENTS_MEET", "/nonexistent")  # where the meeting agents note their processes
MEET_SECONDS = 60  # how long one waits for the other before it answers alone


def _meet(context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
    """Note this process, then hold its slot until another process has noted its own:
    one process of one slot cannot hold both. A replay finds both noted at once."""
    path = Path(MEET_FILE)
    with open(path, "a") as f:
        f.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + MEET_SECONDS
    while len(set(path.read_text().split())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    return "Answer the question."


meeting = Agent(name="meeting", tools=[Agent(name="member", instructions=_meet).as_tool("meet", "Meet.")])

not_an_agent = "a string"


@function_tool(name_override="tally")
def other_tally() -> str:
    """Another tool of the same name."""
    return "other"


clashing = Agent(name="clashing", tools=[tally], handoffs=[Agent(name="other", tools=[other_tally])])


@function_tool
def plot(label: str) -> list[ToolOutputText | ToolOutputImage | ToolOutputFileContent]:
    """Plot a series: a caption, the plot, a plot kept with OpenAI, and its data."""
    return [
        ToolOutputText(text=f"plot of {label}"),
        ToolOutputImage(image_url=data_url(png(4 + len(label), 3), "image/png")),
        ToolOutputImage(file_id="file-plot1"),
        ToolOutputFileContent(file_data=data_url(b"1,2\n", "text/csv"), filename="series.csv"),
    ]


plotting = Agent(name="plotting", instructions="Plot what is asked.", tools=[plot])
