"""Agents SDK agents the integration tests run on covey workers (importable from the repo root).

``counted`` writes a line to a file for every run of its tool, so a test counts the
runs across worker processes; ``drifting`` reads its instructions from a file at
every run, so a test changes what a replay asks for.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agents import Agent, RunContextWrapper, function_tool


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

not_an_agent = "a string"


@function_tool(name_override="tally")
def other_tally() -> str:
    """Another tool of the same name."""
    return "other"


clashing = Agent(name="clashing", tools=[tally], handoffs=[Agent(name="other", tools=[other_tally])])
