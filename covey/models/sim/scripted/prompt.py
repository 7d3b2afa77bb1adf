"""What a strategy script of the sim reads from one structured-output request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from covey.models.sim.directives import Directives
from covey.models.sim.structured import Answers


@dataclass(frozen=True)
class Prompt:
    task: str  # the first user message: the agent's task, where directives live
    last: str  # the last user message: what this very call asks
    directives: Directives  # parsed from ``task``; ``directives.scripted`` holds [sim:plan ...] and the like
    answers: Answers  # the plain answers: text, the arithmetic's result, a fraction from the task's digest
    schema: dict[str, Any]  # the JSON Schema asked for
