"""``RunContext``: where an agent sits in its job's tree, carried by every task."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from covey.budgets.budget import Budget
from covey.budgets.scopes import GLOBAL
from covey.config.priorities import LEAST_URGENT, MOST_URGENT

SUBAGENT_DIR = ".sub_agents"
ROOT_AGENT_ID = "root"  # every job's root agent; children are <parent>-sub-<8 hex>
CHILD_MARK = "-sub-"
DEFAULT_CHILD_FRACTION = 0.5  # the share of its budget a child asks for, unless the job says otherwise


def parent_of(agent_id: str) -> str | None:
    """The id of the agent that spawned ``agent_id`` (None for a root): a child's id
    is its parent's with ``-sub-<8 hex>`` after it."""
    parent, mark, _ = agent_id.rpartition(CHILD_MARK)
    return parent if mark else None


class RunContext(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str
    agent_id: str
    parent_id: str | None = None
    depth: int = Field(default=0, ge=0)
    ancestors: list[str] = Field(default_factory=list, description="ids root..parent")
    budget: Budget
    deny: list[str] = Field(default_factory=list, description="inherited by every child")
    allow: list[str] | None = Field(default=None, description="reset for each child")
    subroot: str = Field(default="", description="workspace folder this agent may write")
    scopes: list[str] = Field(default_factory=lambda: [GLOBAL])
    child_fraction: float = Field(
        default=DEFAULT_CHILD_FRACTION, gt=0, le=1, description="share of a budget a child asks for"
    )
    priority: int = Field(
        default=LEAST_URGENT, ge=LEAST_URGENT, le=MOST_URGENT, description="the job's: every agent's messages carry it"
    )

    @property
    def chain(self) -> list[str]:
        """Ids from the root down to this agent: every ledger row it charges."""
        return [*self.ancestors, self.agent_id]

    def child(self, agent_id: str, budget: Budget, allow: list[str] | None) -> RunContext:
        """A child one level down: deny rules are inherited, allow rules are the child's own."""
        return RunContext(
            job_id=self.job_id,
            agent_id=agent_id,
            parent_id=self.agent_id,
            depth=self.depth + 1,
            ancestors=self.chain,
            budget=budget,
            deny=self.deny,
            allow=allow,
            subroot=f"{SUBAGENT_DIR}/{agent_id}",
            scopes=self.scopes,
            child_fraction=self.child_fraction,
            priority=self.priority,
        )
