"""The specialists an orchestrator delegates to: who they are and what they may use.

A specialist is a named sub-agent with a role, instructions, a short list of tools
and a kind. ``analysis`` specialists only look and report, so an orchestrator may
run them at once; ``write`` specialists change the workspace, so they run one at a
time; ``qa`` specialists verify the written result last and answer a verdict
(passed, findings) that may send the work round again. Specialists never spawn:
whatever their tools say, ``spawn_agents`` and ``delegate`` are stripped when the
specialist is validated, so a specialist is a leaf of the tree and its parent's
budget split stays the whole story.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from covey.orchestration.actions import ChildRequest
from covey.tools.builtin import SPAWN_TOOLS
from covey.tools.registry import check_names

Kind = Literal["analysis", "write", "qa"]

STRATEGY = "react"  # a specialist thinks and uses its tools; it never orchestrates in turn

DEFAULT_TOOLS: dict[str, list[str]] = {
    "analysis": ["read_file", "calculator"],
    "write": ["write_file", "read_file"],
    "qa": ["read_file", "calculator"],
}


class Specialist(BaseModel):
    """One specialist. ``tools`` left unset takes its kind's defaults
    (analysis and qa: read_file, calculator; write: write_file, read_file); spawn
    tools are dropped from whatever is given."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$", description="its role in the tree")
    role: str = Field(min_length=1, max_length=200, description="what it is expert at, in a phrase")
    instructions: str = ""
    tools: list[str] | None = None
    kind: Kind = "analysis"

    @field_validator("tools")
    @classmethod
    def _named_and_leaf(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        check_names(value)
        return [name for name in dict.fromkeys(value) if name not in SPAWN_TOOLS]

    @model_validator(mode="after")
    def _kind_defaults(self) -> Specialist:
        if self.tools is None:
            self.tools = list(DEFAULT_TOOLS[self.kind])
        return self


BUILTIN: tuple[Specialist, ...] = (
    Specialist(
        name="SecurityExpert",
        role="security auditor: looks for unsafe inputs, leaks and risky operations",
        instructions="Check the task for risks and verify any figure it depends on.",
    ),
    Specialist(
        name="LinterExpert",
        role="reviewer of correctness, consistency and clarity",
        instructions="Check that the work is correct and consistent; recompute what can be recomputed.",
    ),
    Specialist(
        name="QATester",
        role="tester: verifies claims and results independently",
        instructions="Test the written result yourself rather than trusting it; say what fails.",
        kind="qa",
    ),
    Specialist(
        name="Writer",
        role="implementer: puts the agreed result into the workspace",
        instructions="Write what the analysis agreed on, then say what you wrote and where.",
        kind="write",
    ),
)


def duplicate_names(specialists: list[Specialist]) -> list[str]:
    """Names given to more than one specialist, in order of first use."""
    counts = Counter(s.name for s in specialists)
    return [name for name, count in counts.items() if count > 1]


def request(specialist: Specialist, task: str, fraction: float, options: dict[str, Any] | None = None) -> ChildRequest:
    """The child that runs ``specialist`` on ``task`` with ``fraction`` of the
    parent's budget (and ``options`` for its strategy: a qa verdict's schema). Its
    tools are always an explicit list, and it cannot spawn."""
    briefing = (
        f"You are the {specialist.name} specialist, {specialist.role}. {specialist.instructions} "
        "Work on your task alone with your own tools; you cannot start sub-agents. "
        "Finish with a short report: the orchestrator reads only your final answer."
    )
    return ChildRequest(
        task=task,
        role=specialist.name,
        instructions=" ".join(briefing.split()),
        tools=list(specialist.tools or []),
        strategy=STRATEGY,
        options=options or {},
        fraction=fraction,
        can_spawn=False,
    )
